//! The master's pool defaults, written out for the Laravel package (tests only).
//!
//! `config/drover.php`'s pool options that the master itself reads (prefetch, timeout, nice,
//! boot and balancing) take their defaults from the [`PoolSpec`] serde defaults, the one place
//! they are written: this test renders them as `php-client/src/Config/MasterPoolDefaults.php`,
//! which `Drover\Config\Pools::POOL_DEFAULTS` reads, and fails when the checked-in file differs.
//! The package's own defaults stay in PHP where Laravel's differ on purpose: `processes`
//! (required here), `memory` (128, `queue:work`'s), `spawn` (fork), and the worker's options
//! the master never reads (tries, backoff, sleep, ...).

use super::PoolSpec;

const FILE: &str = "php-client/src/Config/MasterPoolDefaults.php";

/// A PHP literal for a JSON value of the defaults (numbers, strings, null).
fn php(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Null => "null".into(),
        serde_json::Value::String(s) => format!("'{s}'"),
        serde_json::Value::Number(n) if n.is_f64() => format!("{:?}", n.as_f64().unwrap()),
        other => other.to_string(),
    }
}

fn render() -> String {
    let pool = PoolSpec::defaults_with("default", vec!["default".into()], 1, vec!["php".into()]);
    let values = [
        ("prefetch", serde_json::json!(pool.prefetch)),
        ("timeout", serde_json::json!(pool.timeout)),
        ("nice", serde_json::json!(pool.nice)),
        ("boot_timeout", serde_json::json!(pool.boot_timeout)),
        ("balance", serde_json::json!(pool.balance)),
        ("min_processes", serde_json::json!(pool.min_processes)),
        ("max_processes", serde_json::json!(pool.max_processes)),
        (
            "balance_max_shift",
            serde_json::json!(pool.balance_max_shift),
        ),
        ("balance_cooldown", serde_json::json!(pool.balance_cooldown)),
        (
            "autoscaling_strategy",
            serde_json::json!(pool.autoscaling_strategy),
        ),
        ("scale_down_delay", serde_json::json!(pool.scale_down_delay)),
    ];
    let mut out = String::from(
        "<?php\n\n\
         // Generated from the drover binary's pool defaults (src/config/php_defaults.rs) by\n\
         // `DROVER_WRITE_CONTRACTS=1 cargo test -p drover-cli --lib php_defaults`: do not edit.\n\n\
         namespace Drover\\Config;\n\n\
         /**\n \
         * The master's defaults for the pool options it reads itself, as the drover binary has\n \
         * them; Pools::POOL_DEFAULTS takes these.\n \
         */\n\
         final class MasterPoolDefaults\n{\n    public const VALUES = [\n",
    );
    for (key, value) in values {
        out += &format!("        '{key}' => {},\n", php(&value));
    }
    out += "    ];\n}\n";
    out
}

#[test]
fn the_laravel_package_takes_the_masters_pool_defaults_from_this_crate() {
    crate::contract_files::check(FILE, &render(), "php_defaults");
}
