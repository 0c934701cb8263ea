//! The master's pool options, written out for the Laravel package (tests only): their defaults
//! and their limits, so config/drover.php is completed and checked by the master's own rules.
//!
//! - Defaults: the options the master reads itself (prefetch, timeout, nice, boot and balancing)
//!   take theirs from the [`PoolSpec`] serde defaults, the one place they are written. The
//!   package's own defaults stay in PHP where they differ on purpose: `processes` (required here),
//!   `memory` (128, `queue:work`'s), `spawn` (fork), and the worker's options the master never
//!   reads (tries, backoff, sleep, ...).
//! - Limits: [`POOL_LIMITS`], which `Drover\Config\PoolLimits` applies with its own code in the
//!   same words, and the rule over several options, `coverage_problem`; the cases of
//!   `contract_cases` and `coverage_cases` are written to a PHPUnit fixture, and PHP's words for
//!   each are checked against these.
//!
//! The test renders `php-client/src/Config/MasterPoolOptions.php` and
//! `php-client/tests/fixtures/pool_limits.json` and fails when a checked-in file differs.

use super::pool_limits::{contract_cases, coverage_cases, Limit, MAX_SECONDS, POOL_LIMITS};
use super::PoolSpec;

const CLASS: &str = "php-client/src/Config/MasterPoolOptions.php";
const CASES: &str = "php-client/tests/fixtures/pool_limits.json";

/// A PHP literal for a JSON value (numbers, strings, null, lists of strings).
fn php(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Null => "null".into(),
        serde_json::Value::String(s) => {
            format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
        }
        serde_json::Value::Number(n) if n.is_f64() => format!("{:?}", n.as_f64().unwrap()),
        serde_json::Value::Bool(b) => b.to_string(),
        serde_json::Value::Array(items) => {
            format!("[{}]", items.iter().map(php).collect::<Vec<_>>().join(", "))
        }
        other => other.to_string(),
    }
}

fn limit(limit: &Limit) -> String {
    use serde_json::json;
    let fields = match limit {
        Limit::Whole {
            min,
            max,
            null_ok,
            note,
        } => vec![
            ("kind", json!("whole")),
            ("min", json!(min)),
            ("max", json!(max)),
            ("null_ok", json!(null_ok)),
            ("note", json!(note)),
        ],
        Limit::Seconds { zero_ok } => vec![("kind", json!("seconds")), ("zero_ok", json!(zero_ok))],
        Limit::OneOf { words, note } => vec![
            ("kind", json!("one_of")),
            ("words", json!(words)),
            ("note", json!(note)),
        ],
    };
    let inner: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("'{k}' => {}", php(v)))
        .collect();
    format!("[{}]", inner.join(", "))
}

fn render_class() -> String {
    let pool = PoolSpec::defaults_with("default", vec!["default".into()], 1, vec!["php".into()]);
    let defaults = [
        "prefetch",
        "timeout",
        "outage_grace",
        "nice",
        "boot_timeout",
        "balance",
        "min_processes",
        "max_processes",
        "balance_max_shift",
        "balance_cooldown",
        "autoscaling_strategy",
        "scale_down_delay",
    ];
    let mut out = String::from(
        "<?php\n\n\
         // Generated from the drover binary's pool options (src/config/php_pool_options.rs) by\n\
         // `DROVER_WRITE_CONTRACTS=1 cargo test -p drover-cli --lib php_pool_options`: do not edit.\n\n\
         namespace Drover\\Config;\n\n\
         /**\n \
         * The pool options the master reads, as the drover binary has them: the defaults of those\n \
         * it reads itself, and the limits of every one (Pools applies them in the master's words).\n \
         */\n\
         final class MasterPoolOptions\n{\n    public const DEFAULTS = [\n",
    );
    for key in defaults {
        out += &format!("        '{key}' => {},\n", php(&pool.option(key)));
    }
    out += "    ];\n\n    public const LIMITS = [\n";
    for (option, l) in POOL_LIMITS {
        out += &format!("        '{option}' => {},\n", limit(l));
    }
    out += &format!(
        "    ];\n\n    /** The longest duration, seconds (a year). */\n    public const MAX_SECONDS = {};\n}}\n",
        MAX_SECONDS as u64
    );
    out
}

fn render_cases() -> String {
    use serde_json::json;
    let options: Vec<serde_json::Value> = contract_cases()
        .into_iter()
        .map(|(option, value, problem)| json!({"option": option, "value": value, "problem": problem}))
        .collect();
    let coverage: Vec<serde_json::Value> = coverage_cases()
        .into_iter()
        .map(|(balance, [processes, min, max, queues], problem)| {
            json!({
                "balance": balance,
                "processes": processes,
                "min_processes": min,
                "max_processes": max,
                "queues": queues,
                "problem": problem,
            })
        })
        .collect();
    serde_json::to_string_pretty(&json!({"options": options, "coverage": coverage})).unwrap() + "\n"
}

#[test]
fn the_laravel_package_takes_the_masters_pool_defaults_and_limits_from_this_crate() {
    crate::contract_files::check(CLASS, &render_class(), "php_pool_options");
    crate::contract_files::check(CASES, &render_cases(), "php_pool_options");
}
