//! Embedded migrations, applied in order under a session advisory lock so that two nodes starting
//! together never migrate at once.
//!
//! The SQL files in `broker/migrations/` (`NNNN_name.sql`) are the one schema: this binary embeds
//! them, and the Laravel package's migration (`php artisan migrate`, published by `php artisan
//! drover:install`) applies the same files from the same directory, recording them in the same
//! `drover.schema_migrations` table under the same lock. Whichever runs first migrates; the other
//! finds nothing to do. A schema newer than the binary is refused by name; a schema older than it
//! is migrated at start, or refused when auto-migration is off.

use std::time::Duration;

use tokio_postgres::Client;

use crate::BrokerError;

/// (version, name, SQL). Append only; never edit an applied migration.
const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "jobs", include_str!("../migrations/0001_jobs.sql")),
    (2, "failure", include_str!("../migrations/0002_failure.sql")),
    (3, "indexes", include_str!("../migrations/0003_indexes.sql")),
    (4, "metrics", include_str!("../migrations/0004_metrics.sql")),
    (5, "groups", include_str!("../migrations/0005_groups.sql")),
    (
        6,
        "pin_plans",
        include_str!("../migrations/0006_pin_plans.sql"),
    ),
    (
        7,
        "paused_queues",
        include_str!("../migrations/0007_paused_queues.sql"),
    ),
    (
        8,
        "pause_confirmations",
        include_str!("../migrations/0008_pause_confirmations.sql"),
    ),
    (
        9,
        "outage_grace",
        include_str!("../migrations/0009_outage_grace.sql"),
    ),
    (
        10,
        "queue_budgets",
        include_str!("../migrations/0010_queue_budgets.sql"),
    ),
    (11, "limits", include_str!("../migrations/0011_limits.sql")),
    (
        12,
        "schedule",
        include_str!("../migrations/0012_schedule.sql"),
    ),
    (13, "roles", include_str!("../migrations/0013_roles.sql")),
    (
        14,
        "console",
        include_str!("../migrations/0014_console.sql"),
    ),
    (
        15,
        "exactly_once",
        include_str!("../migrations/0015_exactly_once.sql"),
    ),
    (
        16,
        "workflows",
        include_str!("../migrations/0016_workflows.sql"),
    ),
];

/// The advisory lock key ("drover" in ASCII). The Laravel package's migrator takes the same one.
pub const LOCK_KEY: i64 = 0x64726f766572;

/// The schema version this binary needs: its newest migration.
pub fn latest() -> i32 {
    MIGRATIONS.last().map(|m| m.0).unwrap_or(0)
}

/// The versions recorded in `drover.schema_migrations` (none when the table does not exist).
/// Simple queries only: no statement is prepared, so this is safe through any pooler.
pub async fn applied(client: &impl tokio_postgres::GenericClient) -> Result<Vec<i32>, BrokerError> {
    let rows = client
        .simple_query("SELECT version::text FROM drover.schema_migrations ORDER BY version")
        .await;
    let rows = match rows {
        Ok(rows) => rows,
        // undefined_table (or schema): nothing applied yet.
        Err(e) if matches!(e.code().map(|c| c.code()), Some("42P01" | "3F000")) => {
            return Ok(Vec::new())
        }
        Err(e) => return Err(BrokerError::query("reading applied migrations")(e)),
    };
    Ok(rows
        .iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0)?.parse().ok(),
            _ => None,
        })
        .collect())
}

/// The oldest schema a binary may have to run on a database with migration `sql` applied: the
/// migration's first line, `-- oldest reader: N` (an expand-only step names the schema before
/// it, or older). `None` when it names none: only binaries that know it may run with it.
pub fn oldest_reader(sql: &str) -> Option<i32> {
    sql.lines()
        .next()?
        .strip_prefix("-- oldest reader:")?
        .trim()
        .parse()
        .ok()
}

/// The applied migrations with the oldest schema each allows to run on it (`None`: not said, or
/// recorded by a drover that did not record it).
async fn applied_with_readers(
    client: &impl tokio_postgres::GenericClient,
) -> Result<Vec<(i32, Option<i32>)>, BrokerError> {
    let done = applied(client).await?;
    let readers = client
        .simple_query("SELECT version::text, oldest_reader::text FROM drover.schema_migrations")
        .await;
    let mut out: Vec<(i32, Option<i32>)> = done.iter().map(|v| (*v, None)).collect();
    // undefined_column: recorded only by drovers that did not say (0.1).
    if let Ok(rows) = readers {
        for row in rows {
            if let tokio_postgres::SimpleQueryMessage::Row(row) = row {
                let version: Option<i32> = row.get(0).and_then(|v| v.parse().ok());
                let reader: Option<i32> = row.get(1).and_then(|v| v.parse().ok());
                if let Some(entry) = out.iter_mut().find(|(v, _)| Some(*v) == version) {
                    entry.1 = reader;
                }
            }
        }
    }
    Ok(out)
}

/// What a master checks at start: a schema newer than this binary is refused unless each newer
/// migration says a binary of this schema may run on it; missing migrations are applied when
/// `auto` is set, else refused, naming them and the command that applies them. Returns how many
/// migrations ran.
///
/// An up-to-date schema is only read: a master whose role may not change the schema (its
/// least-privilege role, docs/postgres-roles.md) starts on it; one that would have to migrate is
/// told to have the owner do it.
pub async fn ensure(client: &mut Client, auto: bool) -> Result<usize, BrokerError> {
    let done = applied_with_readers(client).await?;
    refuse_newer(&done)?;
    let stale = stale_readers(&done);
    let done: Vec<i32> = done.into_iter().map(|(v, _)| v).collect();
    let missing: Vec<String> = MIGRATIONS
        .iter()
        .filter(|(v, _, _)| !done.contains(v))
        .map(|(v, name, _)| format!("{v:04}_{name}"))
        .collect();
    if missing.is_empty() {
        if !stale.is_empty() {
            correct_readers_at_start(client, auto, &stale).await;
        }
        return Ok(0);
    }
    if auto {
        return migrate(client).await.map_err(|e| {
            if insufficient_privilege(&e) {
                BrokerError::Schema(format!(
                    "drover's schema in this database needs migration(s) {}, and the master's database role may not apply them ({e}). Apply them as the owner of schema drover — `drover migrate`, or `php artisan migrate` — then start the master again (docs/postgres-roles.md)",
                    missing.join(", ")
                ))
            } else {
                e
            }
        });
    }
    Err(BrokerError::Schema(format!(
        "drover's schema in this database is older than this drover needs: migration(s) {} not applied, and auto_migrate is off. Apply them with `php artisan migrate` (the migration `php artisan drover:install` published) or `drover migrate`, then start the master again",
        missing.join(", ")
    )))
}

/// An applied migration whose recorded oldest reader is stricter than its file says now:
/// (version, recorded, said).
type StaleReader = (i32, Option<i32>, i32);

/// The applied migrations this binary knows whose recorded oldest reader is stricter than the
/// migration's first line says now (or not recorded): a header corrected after the migration
/// was applied somewhere (0013 said 12 until issue 57 found that drover 0.2.0, schema 10, runs on
/// it). The recorded value is what every binary and package reads — an older one cannot read this
/// binary's files — so the migrators correct it. Only ever lowered: a migrator that knows an
/// older, stricter header never puts it back.
fn stale_readers(done: &[(i32, Option<i32>)]) -> Vec<StaleReader> {
    MIGRATIONS
        .iter()
        .filter_map(|(version, _, sql)| {
            let said = oldest_reader(sql)?;
            let (_, recorded) = done.iter().find(|(v, _)| v == version)?;
            recorded
                .is_none_or(|r| r > said)
                .then_some((*version, *recorded, said))
        })
        .collect()
}

fn describe_stale(stale: &[StaleReader]) -> String {
    stale
        .iter()
        .map(|(v, recorded, said)| {
            let recorded = recorded.map_or("nothing".to_string(), |r| r.to_string());
            format!("{v:04} records {recorded} where this drover says {said}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A starting master on an up-to-date schema whose recorded oldest readers are too strict: with
/// `auto`, corrects them as a migration would (under the migrations' lock); without, or when its
/// role may not, says so — this master runs either way, an older one would be refused.
async fn correct_readers_at_start(client: &mut Client, auto: bool, stale: &[StaleReader]) {
    let what = describe_stale(stale);
    let why = if auto {
        match migrate(client).await {
            Ok(_) => return,
            Err(e) => format!("correcting it failed: {e}"),
        }
    } else {
        "auto_migrate is off".to_string()
    };
    tracing::warn!(
        "drover.schema_migrations is stricter than this drover's migrations say ({what}): a master of the previous release is refused on this database until it is corrected ({why}). Correct it as the owner of schema drover: `drover migrate`, or `php artisan migrate` (docs/upgrading.md)"
    );
}

/// The applied migrations newer than schema `known` that do not let a binary of it run on them:
/// their oldest reader is above it, or not said.
pub fn blocking(done: &[(i32, Option<i32>)], known: i32) -> Vec<i32> {
    done.iter()
        .filter(|(v, reader)| *v > known && reader.is_none_or(|r| r > known))
        .map(|(v, _)| *v)
        .collect()
}

/// Refuses a schema that a newer drover migrated, unless every migration this binary does not
/// know says a binary of this schema may run on it (its `oldest reader`): the window that lets
/// masters one release apart share a database during a rolling upgrade (docs/upgrading.md).
fn refuse_newer(done: &[(i32, Option<i32>)]) -> Result<(), BrokerError> {
    let known = latest();
    let Some(found) = done.iter().map(|(v, _)| *v).filter(|v| *v > known).max() else {
        return Ok(());
    };
    let blocking: Vec<String> = blocking(done, known)
        .iter()
        .map(|v| format!("{v:04}"))
        .collect();
    if blocking.is_empty() {
        tracing::info!(
            schema = found,
            "drover's schema in this database is at version {found}, newer than this drover (schema {known}); each newer migration says this drover may run on it (a rolling upgrade in progress)"
        );
        return Ok(());
    }
    Err(BrokerError::Schema(format!(
        "drover's schema in this database is at version {found}, newer than this drover (version {}, schema {known}) knows, and migration(s) {} need a newer drover: a drover more than one release newer migrated it. Upgrade this binary (and drover/laravel) to the version that did (docs/upgrading.md)",
        env!("CARGO_PKG_VERSION"),
        blocking.join(", ")
    )))
}

/// How long a migration may wait for a lock on drover's tables, and how often it tries.
///
/// A step such as `ALTER TABLE drover.jobs` needs an ACCESS EXCLUSIVE lock for a moment; while it
/// waits for one, every claim, settle and enqueue queues behind it. A long transaction that
/// read drover.jobs (a report, a `pg_dump`, a session idle in a transaction) would make that wait
/// — and so the queue's stop — as long as itself. So each try waits at most `each` for a lock,
/// gives up (rolling back: nothing is half-applied, and the queue goes on) and tries again after
/// a pause, up to `tries` times, then fails naming what to do.
#[derive(Debug, Clone, Copy)]
pub struct LockWait {
    /// The longest one try waits for a lock (`lock_timeout`). Default 5 s.
    pub each: Duration,
    /// How many tries before giving up. Default 6 (about a minute in all).
    pub tries: u32,
    /// The pause before the second try, doubled before each further one, up to 8 s. Default 1 s.
    pub pause: Duration,
}

impl Default for LockWait {
    fn default() -> Self {
        LockWait {
            each: Duration::from_secs(5),
            tries: 6,
            pause: Duration::from_secs(1),
        }
    }
}

/// Applies every migration not yet recorded in `drover.schema_migrations`; returns how many ran.
///
/// All in one transaction under a transaction-scoped advisory lock, in simple queries: nothing
/// depends on the session, so it works through PgBouncer in transaction mode as directly, and a
/// failed migration leaves the schema as it was. A lock on drover's tables is waited for as
/// [`LockWait::default`] says.
pub async fn migrate(client: &mut Client) -> Result<usize, BrokerError> {
    migrate_waiting(client, LockWait::default()).await
}

/// [`migrate`] with its lock waits bounded by `wait`.
pub async fn migrate_waiting(client: &mut Client, wait: LockWait) -> Result<usize, BrokerError> {
    let mut pause = wait.pause;
    for attempt in 1..=wait.tries.max(1) {
        match migrate_once(client, wait.each).await {
            Err(e) if lock_not_available(&e) && attempt < wait.tries => {
                tracing::warn!(
                    attempt,
                    "a migration waited {:?} for a lock on drover's tables, which a long transaction holds; trying again in {pause:?} (the queue runs meanwhile)",
                    wait.each
                );
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(8));
            }
            Err(e) if lock_not_available(&e) => {
                return Err(BrokerError::MigrationLocked {
                    tries: wait.tries,
                    each: wait.each,
                })
            }
            other => return other,
        }
    }
    unreachable!("the last try returns")
}

/// The role may not do what the statement asked (SQLSTATE 42501).
fn insufficient_privilege(e: &BrokerError) -> bool {
    matches!(e, BrokerError::Query { source, .. }
        if source.code() == Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE))
}

/// The statement gave up waiting for a lock (`lock_timeout`, SQLSTATE 55P03).
fn lock_not_available(e: &BrokerError) -> bool {
    matches!(e, BrokerError::Query { source, .. }
        if source.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE))
}

async fn migrate_once(client: &mut Client, lock_wait: Duration) -> Result<usize, BrokerError> {
    let tx = client
        .transaction()
        .await
        .map_err(BrokerError::query("starting the migrations"))?;
    tx.batch_execute(&format!(
        "SELECT pg_advisory_xact_lock({LOCK_KEY});
         CREATE SCHEMA IF NOT EXISTS drover;
         CREATE TABLE IF NOT EXISTS drover.schema_migrations (
             version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());
         ALTER TABLE drover.schema_migrations ADD COLUMN IF NOT EXISTS oldest_reader integer"
    ))
    .await
    .map_err(BrokerError::query("creating schema drover"))?;
    // After the advisory lock (another node's migrations are waited for as long as they take):
    // from here, no lock on a table is waited for longer than this.
    tx.batch_execute(&format!(
        "SET LOCAL lock_timeout = {}",
        lock_wait.as_millis().max(1)
    ))
    .await
    .map_err(BrokerError::query("bounding the migrations' lock waits"))?;
    let done = applied_with_readers(&tx).await?;
    refuse_newer(&done)?;
    let stale = stale_readers(&done);
    for (version, _, said) in &stale {
        // Numbers of this binary's own.
        tx.batch_execute(&format!(
            "UPDATE drover.schema_migrations SET oldest_reader = {said} WHERE version = {version}"
        ))
        .await
        .map_err(BrokerError::query("correcting a migration's oldest reader"))?;
    }
    let done: Vec<i32> = done.into_iter().map(|(v, _)| v).collect();
    let mut ran = Vec::new();
    for (version, name, sql) in MIGRATIONS {
        if done.contains(version) {
            continue;
        }
        tx.batch_execute(sql)
            .await
            .map_err(BrokerError::query("applying a migration"))?;
        // Every value is this binary's own constant (numbers, a name of [a-z_]).
        let reader = oldest_reader(sql).map_or("NULL".to_string(), |r| r.to_string());
        tx.batch_execute(&format!(
            "INSERT INTO drover.schema_migrations (version, name, oldest_reader) VALUES ({version}, '{name}', {reader})"
        ))
        .await
        .map_err(BrokerError::query("recording a migration"))?;
        ran.push((version, name));
    }
    // Whoever migrates owns the schema: the roles that exist get their rights on what this
    // release added (a no-op without them).
    crate::roles::grant(&tx).await?;
    tx.commit()
        .await
        .map_err(BrokerError::query("committing the migrations"))?;
    for (version, name) in &ran {
        tracing::info!(version, name, "applied migration");
    }
    if !stale.is_empty() {
        tracing::info!(
            "corrected the oldest reader recorded in drover.schema_migrations ({}): the previous release's masters run on this schema",
            describe_stale(&stale)
        );
    }
    Ok(ran.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Laravel package applies `broker/migrations/*.sql` by file name: the embedded list must
    /// be exactly those files, in order, named as they are.
    /// Each `drover.NAME` a migration names after `keyword` (case as written in the files).
    fn functions_after<'a>(sql: &'a str, keyword: &str) -> Vec<&'a str> {
        sql.match_indices(keyword)
            .filter_map(|(at, k)| {
                let rest = sql[at + k.len()..].trim_start();
                let name = rest.strip_prefix("drover.")?;
                let end = name
                    .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                    .unwrap_or(name.len());
                Some(&rest[..7 + end])
            })
            .collect()
    }

    #[test]
    fn functions_md_names_the_migration_of_each_functions_current_body() {
        use std::collections::BTreeMap;
        // function -> (current body, earlier bodies, altered by since)
        let mut table: BTreeMap<&str, (String, Vec<String>, Vec<String>)> = BTreeMap::new();
        for (v, name, sql) in MIGRATIONS {
            let file = format!("{v:04}_{name}.sql");
            let created = [
                functions_after(sql, "CREATE OR REPLACE FUNCTION"),
                functions_after(sql, "CREATE FUNCTION"),
            ]
            .concat();
            for f in created {
                let row = table.entry(f).or_default();
                if !row.0.is_empty() && row.0 != file {
                    let earlier = std::mem::take(&mut row.0);
                    row.1.push(earlier);
                }
                row.0 = file.clone();
                row.2.clear();
            }
            for f in functions_after(sql, "ALTER FUNCTION") {
                let row = table.entry(f).or_default();
                if row.0 != file && !row.2.contains(&file) {
                    row.2.push(file.clone());
                }
            }
        }
        let cell = |files: &[String]| match files {
            [] => "—".to_string(),
            files => files
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", "),
        };
        let derived: Vec<String> = table
            .iter()
            .map(|(f, (body, earlier, altered))| {
                format!(
                    "| `{f}` | `{body}` | {} | {} |",
                    cell(earlier),
                    cell(altered)
                )
            })
            .collect();
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/FUNCTIONS.md"),
        )
        .unwrap();
        let written: Vec<String> = doc
            .lines()
            .filter(|l| l.starts_with("| `drover."))
            .map(str::to_string)
            .collect();
        assert_eq!(
            written, derived,
            "broker/migrations/FUNCTIONS.md does not say where each function's current body is"
        );
    }

    #[test]
    fn the_embedded_migrations_are_the_files_the_laravel_package_applies() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|f| f.ends_with(".sql"))
            .collect();
        files.sort();
        let embedded: Vec<String> = MIGRATIONS
            .iter()
            .map(|(v, name, _)| format!("{v:04}_{name}.sql"))
            .collect();
        assert_eq!(files, embedded);
        for (v, name, sql) in MIGRATIONS {
            let on_disk = std::fs::read_to_string(dir.join(format!("{v:04}_{name}.sql"))).unwrap();
            assert_eq!(&on_disk, sql);
        }
    }

    #[test]
    fn a_newer_schema_is_refused_by_name_unless_each_newer_migration_lets_this_binary_run_on_it() {
        let known = latest();
        let (next, after) = (known + 1, known + 2);
        // Said nothing (or recorded by a drover that did not record it): refused.
        let message = refuse_newer(&[(1, None), (2, None), (next, None)])
            .unwrap_err()
            .to_string();
        assert!(
            message.contains(&format!("at version {next}, newer than this drover")),
            "{message}"
        );
        assert!(message.contains(&format!("{next:04}")), "{message}");
        // An expand-only step one release ahead: runs.
        refuse_newer(&[(1, None), (next, Some(known))]).unwrap();
        refuse_newer(&[(1, None), (next, Some(known - 1))]).unwrap();
        // Two steps, the second needing a binary that knows the first: refused, naming it.
        let message = refuse_newer(&[(next, Some(known)), (after, Some(next))])
            .unwrap_err()
            .to_string();
        assert!(
            message.contains(&format!("at version {after}")),
            "{message}"
        );
        assert!(
            message.contains(&format!("{after:04}")) && !message.contains(&format!("{next:04},")),
            "{message}"
        );
        refuse_newer(&[(1, None), (2, None)]).unwrap();
    }

    /// What this release's migrators record: each migration's oldest reader as its file says.
    fn as_recorded() -> Vec<(i32, Option<i32>)> {
        MIGRATIONS
            .iter()
            .map(|(v, _, sql)| (*v, oldest_reader(sql)))
            .collect()
    }

    /// The window docs/upgrading.md promises: masters one release apart on one database. A
    /// binary of drover 0.2.0 (schema 10, RELEASES) runs on every schema since, as recorded.
    #[test]
    fn a_master_of_the_previous_release_runs_on_this_releases_schema() {
        let recorded = as_recorded();
        for schema in 10..=latest() {
            let applied: Vec<(i32, Option<i32>)> = recorded
                .iter()
                .copied()
                .filter(|(v, _)| *v <= schema)
                .collect();
            assert_eq!(
                blocking(&applied, 10),
                Vec::<i32>::new(),
                "schema {schema} refuses drover 0.2.0"
            );
        }
    }

    #[test]
    fn a_recorded_oldest_reader_stricter_than_its_migration_says_is_corrected_and_never_raised() {
        let recorded = as_recorded();
        assert_eq!(stale_readers(&recorded), vec![]);
        // 0013 as its header said until issue 57: corrected to what the file says now.
        let said = oldest_reader(MIGRATIONS[12].2).unwrap();
        assert_eq!((MIGRATIONS[12].0, said), (13, 10));
        let mut strict = recorded.clone();
        strict[12].1 = Some(12);
        assert_eq!(stale_readers(&strict), vec![(13, Some(12), 10)]);
        assert_eq!(blocking(&strict, 10), vec![13], "what drover 0.2.0 refused");
        assert!(describe_stale(&stale_readers(&strict))
            .contains("0013 records 12 where this drover says 10"));
        // Recorded as nothing (refuses every older binary): said now.
        strict[12].1 = None;
        assert_eq!(stale_readers(&strict), vec![(13, None, 10)]);
        // Looser than the file says (a later release corrected it further): left alone.
        strict[12].1 = Some(7);
        assert_eq!(stale_readers(&strict), vec![]);
        // Not applied here, or not this binary's: not touched.
        assert_eq!(
            stale_readers(&[(1, None), (latest() + 1, Some(99))]),
            vec![]
        );
    }

    #[test]
    fn a_migration_names_the_oldest_schema_that_may_run_on_it_on_its_first_line() {
        assert_eq!(
            oldest_reader("-- oldest reader: 7\nALTER TABLE x;"),
            Some(7)
        );
        assert_eq!(oldest_reader("-- oldest reader:12"), Some(12));
        assert_eq!(oldest_reader("ALTER TABLE x;\n-- oldest reader: 7"), None);
        assert_eq!(oldest_reader("-- oldest reader: seven"), None);
        assert_eq!(oldest_reader(""), None);
        // The migrations of this release that said so.
        for (v, name, sql) in MIGRATIONS {
            if *v >= 8 {
                let reader = oldest_reader(sql)
                    .unwrap_or_else(|| panic!("{v:04}_{name} names no oldest reader"));
                assert!(reader < *v, "{v:04}_{name}");
            }
        }
    }
}
