<?php

// Generated from the drover binary's pool options (src/config/php_pool_options.rs) by
// `DROVER_WRITE_CONTRACTS=1 cargo test -p drover-cli --lib php_pool_options`: do not edit.

namespace Drover\Config;

/**
 * The pool options the master reads, as the drover binary has them: the defaults of those
 * it reads itself, and the limits of every one (Pools applies them in the master's words).
 */
final class MasterPoolOptions
{
    public const DEFAULTS = [
        'prefetch' => 1,
        'timeout' => 60,
        'outage_grace' => 0.0,
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

    public const LIMITS = [
        'processes' => ['kind' => 'whole', 'min' => 1, 'max' => 4096, 'null_ok' => false, 'note' => ''],
        'prefetch' => ['kind' => 'whole', 'min' => 1, 'max' => 256, 'null_ok' => false, 'note' => ''],
        'timeout' => ['kind' => 'whole', 'min' => 0, 'max' => 31536000, 'null_ok' => false, 'note' => ' (seconds, a year at most; 0 = no limit)'],
        'memory' => ['kind' => 'whole', 'min' => 0, 'max' => 1048576, 'null_ok' => false, 'note' => ' (MiB; 0 = no limit)'],
        'nice' => ['kind' => 'whole', 'min' => -20, 'max' => 19, 'null_ok' => false, 'note' => ''],
        'boot_timeout' => ['kind' => 'seconds', 'zero_ok' => false],
        'outage_grace' => ['kind' => 'seconds', 'zero_ok' => true],
        'spawn' => ['kind' => 'one_of', 'words' => ['fork', 'exec'], 'note' => ' (fork: workers forked from a booted zygote; exec: each worker boots on its own)'],
        'balance' => ['kind' => 'one_of', 'words' => ['off', 'simple', 'auto'], 'note' => ''],
        'min_processes' => ['kind' => 'whole', 'min' => 1, 'max' => 4096, 'null_ok' => false, 'note' => ''],
        'max_processes' => ['kind' => 'whole', 'min' => 1, 'max' => 4096, 'null_ok' => true, 'note' => ''],
        'balance_max_shift' => ['kind' => 'whole', 'min' => 1, 'max' => 4096, 'null_ok' => false, 'note' => ''],
        'balance_cooldown' => ['kind' => 'seconds', 'zero_ok' => false],
        'autoscaling_strategy' => ['kind' => 'one_of', 'words' => ['time', 'size'], 'note' => ''],
        'scale_down_delay' => ['kind' => 'seconds', 'zero_ok' => true],
    ];

    /** The longest duration, seconds (a year). */
    public const MAX_SECONDS = 31536000;
}
