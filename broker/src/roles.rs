//! Least-privilege database roles (docs/postgres-roles.md).
//!
//! The master needs rows of drover's schema, not the application's tables: it should not connect
//! as the application's owner role. drover defines four NOLOGIN group roles — [`ROLES`] — whose
//! rights on schema `drover` are `../roles/grants.sql`; an operator gives each login role the one
//! it needs. `drover migrate --create-roles` creates them ([`CREATE_ROLES_SQL`], needs
//! CREATEROLE), `drover migrate --print-roles` prints the SQL for a DBA ([`print_sql`]), and every
//! migration re-applies the grants ([`GRANTS_SQL`], from [`crate::migrate`]) so the tables a new
//! release adds are granted with it.
//!
//! At start the master reads which of its rights its role lacks ([`missing_grants`]) and refuses
//! to serve without them, naming each and the fix ([`refusal`]): a missing right would otherwise
//! surface later, as a claim or settle failing over and over.

use tokio_postgres::GenericClient;

use crate::BrokerError;

/// drover's group roles and what each is for (its rights: `../roles/grants.sql`).
pub const ROLES: [(&str, &str); 4] = [
    (
        "drover_master",
        "the master: claims, settles, renews and maintains drover's rows",
    ),
    (
        "drover_producer",
        "the application: enqueues (INSERT into drover.jobs, drover.enqueue*)",
    ),
    (
        "drover_reader",
        "the dashboard and drover:status: reads drover's tables",
    ),
    (
        "drover_operator",
        "the dashboard's actions and operator commands: drover_reader, and drover's rows",
    ),
];

/// Creates the [`ROLES`] that are missing (NOLOGIN), with the operator a member of the reader and
/// the master given `pg_read_all_stats` where the running role may grant it.
pub const CREATE_ROLES_SQL: &str = include_str!("../roles/create_roles.sql");

/// The [`ROLES`]' rights on schema `drover`; idempotent, a no-op for a role that does not exist.
pub const GRANTS_SQL: &str = include_str!("../roles/grants.sql");

/// What `drover migrate --print-roles` prints: the SQL that creates the roles and grants their
/// rights, for a DBA to run as a role with CREATEROLE that owns drover's schema, after the
/// migrations.
pub fn print_sql() -> String {
    let mut out = String::from(
        "-- drover's least-privilege roles (docs/postgres-roles.md). Run after `drover migrate`, as\n\
         -- the owner of schema drover with CREATEROLE (or a superuser), in the application's database.\n\
         -- Then give each login role its group role, e.g.:\n",
    );
    for (role, what) in ROLES {
        out.push_str(&format!("--   GRANT {role} TO <login role>;  -- {what}\n"));
    }
    out.push('\n');
    out.push_str(CREATE_ROLES_SQL);
    out.push('\n');
    out.push_str(GRANTS_SQL);
    out
}

/// Creates the roles and grants their rights, on the caller's connection (`drover migrate
/// --create-roles`, after the migrations).
pub async fn create(client: &impl GenericClient) -> Result<(), BrokerError> {
    client
        .batch_execute(CREATE_ROLES_SQL)
        .await
        .map_err(BrokerError::query(
            "creating drover's roles (this needs CREATEROLE: run `drover migrate --print-roles` and give the SQL to a DBA)",
        ))?;
    grant(client).await
}

/// Gives the existing [`ROLES`] their rights on schema `drover` (after every migration).
pub async fn grant(client: &impl GenericClient) -> Result<(), BrokerError> {
    client
        .batch_execute(GRANTS_SQL)
        .await
        .map_err(BrokerError::query("granting drover's roles their rights"))
}

/// The session's role, and the rights a master needs on drover's schema that it lacks, each
/// named as a GRANT names it (`UPDATE on drover.jobs`). Empty: it may run.
pub async fn missing_grants(
    client: &impl GenericClient,
) -> Result<(String, Vec<String>), BrokerError> {
    let role: String = client
        .query_one("SELECT current_user::text", &[])
        .await
        .map_err(BrokerError::query("reading the master's database role"))?
        .get(0);
    let rows = client
        .query(include_str!("../queries/missing_grants.sql"), &[])
        .await
        .map_err(BrokerError::query("checking the master's grants"))?;
    Ok((role, rows.iter().map(|r| r.get(0)).collect()))
}

/// Refuses (a configuration error, [`refusal`]) when the session's role lacks a right a master
/// needs on drover's schema; nothing to refuse while there is no schema yet.
pub async fn refuse_without_grants(client: &impl GenericClient) -> Result<(), BrokerError> {
    let (role, missing) = missing_grants(client).await?;
    match refusal(&role, &missing) {
        Some(refusal) => Err(BrokerError::Config(vec![refusal])),
        None => Ok(()),
    }
}

/// How many missing rights a refusal names before "and N more".
const NAMED: usize = 8;

/// Why a master whose role `role` lacks `missing` refuses to start, and the fix; `None` when
/// nothing is missing. `role` is PostgreSQL's (an identifier, quoted as SQL quotes it).
pub fn refusal(role: &str, missing: &[String]) -> Option<String> {
    if missing.is_empty() {
        return None;
    }
    let mut named = missing[..missing.len().min(NAMED)].join(", ");
    if missing.len() > NAMED {
        named.push_str(&format!(", and {} more", missing.len() - NAMED));
    }
    let quoted = format!("\"{}\"", role.replace('"', "\"\""));
    Some(format!(
        "the master's database role {quoted} lacks {} right(s) a master needs on drover's schema: {named}. Give it drover's master role: as the owner of schema drover, `drover migrate --create-roles` (or a DBA runs `drover migrate --print-roles`), then GRANT drover_master TO {quoted} (docs/postgres-roles.md)",
        missing.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_missing_is_no_refusal() {
        assert_eq!(refusal("queue_master", &[]), None);
    }

    #[test]
    fn a_refusal_names_the_role_each_missing_right_and_the_fix() {
        let missing = vec![
            "USAGE on schema drover".to_string(),
            "UPDATE on drover.jobs".to_string(),
        ];
        let message = refusal("queue_master", &missing).unwrap();
        assert!(
            message.contains("\"queue_master\" lacks 2 right(s)"),
            "{message}"
        );
        assert!(
            message.contains("USAGE on schema drover, UPDATE on drover.jobs."),
            "{message}"
        );
        assert!(
            message.contains("drover migrate --create-roles")
                && message.contains("GRANT drover_master TO \"queue_master\"")
                && message.contains("docs/postgres-roles.md"),
            "{message}"
        );
    }

    #[test]
    fn a_long_list_is_cut_with_a_count_and_a_quote_in_a_role_name_is_doubled() {
        let missing: Vec<String> = (0..20).map(|i| format!("SELECT on drover.t{i}")).collect();
        let message = refusal("we\"ird", &missing).unwrap();
        assert!(message.contains("lacks 20 right(s)"), "{message}");
        assert!(message.contains("drover.t7, and 12 more"), "{message}");
        assert!(!message.contains("drover.t8,"), "{message}");
        assert!(message.contains("TO \"we\"\"ird\""), "{message}");
    }

    #[test]
    fn the_printed_sql_creates_every_role_and_grants_each_its_rights() {
        let sql = print_sql();
        for (role, _) in ROLES {
            assert!(
                sql.contains(&format!("GRANT {role} TO <login role>")),
                "{role}"
            );
            assert!(sql.contains(&format!("'{role}'")), "{role} created");
            assert!(
                GRANTS_SQL.contains(&format!("rolname = '{role}'")),
                "{role} granted"
            );
        }
        // Nothing outside drover's schema is granted.
        for line in GRANTS_SQL
            .lines()
            .filter(|l| l.trim_start().starts_with("GRANT"))
        {
            assert!(line.contains("drover"), "{line}");
            assert!(!line.contains("public."), "{line}");
        }
    }
}
