<?php

// Generated from the drover binary's pool defaults (src/config/php_defaults.rs) by
// `DROVER_WRITE_CONTRACTS=1 cargo test -p drover-cli --lib php_defaults`: do not edit.

namespace Drover\Config;

/**
 * The master's defaults for the pool options it reads itself, as the drover binary has
 * them; Pools::POOL_DEFAULTS takes these.
 */
final class MasterPoolDefaults
{
    public const VALUES = [
        'prefetch' => 1,
        'timeout' => 60,
        'nice' => 0,
        'boot_timeout' => 60.0,
        'balance' => 'off',
        'min_processes' => 1,
        'max_processes' => null,
        'balance_max_shift' => 1,
        'balance_cooldown' => 3.0,
        'autoscaling_strategy' => 'time',
        'scale_down_delay' => 10.0,
    ];
}
