//! The master's own settings' defaults, written out for the Laravel package (tests only).
//!
//! The Laravel package's `config/drover.php` shows a value for each of the master's settings, as
//! a Laravel configuration file does, and its exporter writes only the settings the file sets.
//! This renders the defaults of [`RunConfig`] (its serde defaults, the one place they are
//! written) under the contract's keys into `php-client/tests/fixtures/master_settings.json`;
//! PHPUnit exports the shipped `config/drover.php` and checks that it says exactly these, so a
//! default changed here fails the package's tests until its configuration file says the same.

use super::RunConfig;

const FIXTURE: &str = "php-client/tests/fixtures/master_settings.json";

/// The settings the exporter writes only when `config/drover.php` sets them, by their key in the
/// contract (`long_waits.cooldown` is nested there), with the master's defaults.
fn render() -> String {
    let config = RunConfig::defaults_with(Vec::new());
    let settings = serde_json::json!({
        "auto_migrate": config.auto_migrate,
        "lease": config.lease,
        "shutdown_grace": config.shutdown_grace,
        "poll_interval": config.poll_interval,
        "postgres_user": config.postgres_user,
        "restart_failures": config.restart_failures,
        "restart_pause": config.restart_pause,
        "failed_retention_days": config.failed_retention_days,
        "record_metrics": config.record_metrics,
        "metrics_trim": config.metrics_trim,
        "history_minutes": config.history_minutes,
        "snapshot_alert_secs": config.snapshot_alert_secs,
        "long_waits.cooldown": config.long_waits.cooldown,
    });
    serde_json::to_string_pretty(&settings).unwrap() + "\n"
}

#[test]
fn the_laravel_packages_configuration_shows_the_masters_defaults() {
    crate::contract_files::check(FIXTURE, &render(), "php_settings");
}
