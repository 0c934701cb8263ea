//! Embedded migrations, applied in order under a session advisory lock so that two nodes starting
//! together never migrate at once.

use tokio_postgres::Client;

use crate::BrokerError;

/// (version, name, SQL). Append only; never edit an applied migration.
const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "jobs", include_str!("../migrations/0001_jobs.sql")),
    (2, "failure", include_str!("../migrations/0002_failure.sql")),
];

/// The advisory lock key ("drover" in ASCII).
const LOCK_KEY: i64 = 0x64726f766572;

/// Applies every migration not yet recorded in `drover.schema_migrations`; returns how many ran.
pub async fn migrate(client: &mut Client) -> Result<usize, BrokerError> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&LOCK_KEY])
        .await
        .map_err(BrokerError::query("taking the migration lock"))?;
    let result = apply(client).await;
    let unlock = client
        .execute("SELECT pg_advisory_unlock($1)", &[&LOCK_KEY])
        .await
        .map_err(BrokerError::query("releasing the migration lock"));
    let applied = result?;
    unlock?;
    Ok(applied)
}

async fn apply(client: &mut Client) -> Result<usize, BrokerError> {
    client
        .batch_execute(
            "CREATE SCHEMA IF NOT EXISTS drover;
             CREATE TABLE IF NOT EXISTS drover.schema_migrations (
                 version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
        )
        .await
        .map_err(BrokerError::query("creating schema drover"))?;
    let done: Vec<i32> = client
        .query("SELECT version FROM drover.schema_migrations", &[])
        .await
        .map_err(BrokerError::query("reading applied migrations"))?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut applied = 0;
    for (version, name, sql) in MIGRATIONS {
        if done.contains(version) {
            continue;
        }
        let tx = client
            .transaction()
            .await
            .map_err(BrokerError::query("starting a migration"))?;
        tx.batch_execute(sql)
            .await
            .map_err(BrokerError::query("applying a migration"))?;
        tx.execute(
            "INSERT INTO drover.schema_migrations (version, name) VALUES ($1, $2)",
            &[version, name],
        )
        .await
        .map_err(BrokerError::query("recording a migration"))?;
        tx.commit()
            .await
            .map_err(BrokerError::query("committing a migration"))?;
        tracing::info!(version, name, "applied migration");
        applied += 1;
    }
    Ok(applied)
}
