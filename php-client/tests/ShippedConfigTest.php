<?php

namespace Drover\Tests;

use Drover\Config\Exporter;
use Drover\Config\Pools;
use Drover\DroverQueue;
use PHPUnit\Framework\TestCase;

/**
 * config/drover.php as the package ships it shows a value for every setting, as a Laravel
 * configuration file does; each must be the default it stands for, which is written once
 * elsewhere: the master's settings in the binary (tests/fixtures/master_settings.json, rendered
 * from its serde defaults by `cargo test -p drover-cli --lib php_settings`), a pool's options in
 * Pools::POOL_DEFAULTS (the master's own from MasterPoolOptions), the dispatch's dedup window in
 * DroverQueue. A default changed in one place fails here until the file says the same.
 */
final class ShippedConfigTest extends TestCase
{
    /** @return array<string, mixed> */
    private static function shipped(): array
    {
        // storage_path() asks the application: required inside one that is not booted.
        $previous = \Illuminate\Container\Container::getInstance();
        \Illuminate\Container\Container::setInstance(new \Illuminate\Foundation\Application('/srv/app'));
        try {
            return require __DIR__ . '/../config/drover.php';
        } finally {
            \Illuminate\Container\Container::setInstance($previous);
        }
    }

    public function testTheMastersSettingsAreExportedAsTheMastersDefaults(): void
    {
        $defaults = json_decode((string) file_get_contents(__DIR__ . '/fixtures/master_settings.json'), true, 8, JSON_THROW_ON_ERROR);
        $contract = Exporter::contract(self::shipped(), 'production', '/usr/bin/php', '/srv/app/artisan', '/srv/app');
        foreach ($defaults as $key => $default) {
            if (array_key_exists($key, Exporter::ADDED_SINCE_PREVIOUS_RELEASE)) {
                // Shown at the master's default, and so left out of the contract (a binary of the
                // previous release refuses the key).
                $this->assertSame($default, Exporter::ADDED_SINCE_PREVIOUS_RELEASE[$key], "$key's default");
                $this->assertSame($default, self::shipped()[str_replace('_secs', '', $key)] ?? null, "config/drover.php shows $key at its default");
                $this->assertArrayNotHasKey($key, $contract, "$key at its default is not exported");
                continue;
            }
            $path = explode('.', $key);
            $exported = $contract;
            foreach ($path as $step) {
                $this->assertArrayHasKey($step, $exported, "config/drover.php sets $key (the master's default is " . json_encode($default) . ')');
                $exported = $exported[$step];
            }
            $this->assertSame($default, $exported, "config/drover.php's $key is the master's default");
        }
        // Every setting the exporter writes only when set is in the fixture: none is left unchecked.
        $optional = Exporter::contract(['state_dir' => '/srv/app/storage/drover'], 'production', '/usr/bin/php', '/srv/app/artisan', '/srv/app');
        foreach (array_diff(array_keys($contract), array_keys($optional)) as $key) {
            $this->assertArrayNotHasKey($key, Exporter::ADDED_SINCE_PREVIOUS_RELEASE);
            $this->assertArrayHasKey($key, $defaults, "$key is exported only when set, so its default must be checked");
        }
    }

    public function testEveryPoolOptionIsShownAtItsDefault(): void
    {
        $pool = self::shipped()['defaults']['default'];
        $this->assertEqualsCanonicalizing(array_keys(Pools::POOL_DEFAULTS), array_keys($pool), 'every pool option is shown');
        foreach (Pools::POOL_DEFAULTS as $option => $default) {
            // The file writes whole seconds (60) where the binary's option is a float (60.0).
            $shown = is_float($default) && is_int($pool[$option]) ? (float) $pool[$option] : $pool[$option];
            $this->assertSame($default, $shown, "config/drover.php's defaults.default.$option is its default");
        }
    }

    public function testTheDedupWindowIsTheDispatchsDefault(): void
    {
        $this->assertSame(DroverQueue::DEFAULT_DEDUP_WINDOW, self::shipped()['dedup_window']);
    }

    /**
     * The contract of the shipped config/drover.php is one a binary of the previous release
     * reads: no key that binary does not know (drover 0.2.0's, from its refusal of an unknown
     * key). A binary runs the package one release apart, either way (docs/upgrading.md).
     */
    public function testTheShippedConfigurationsContractIsReadByTheBinaryOfThePreviousRelease(): void
    {
        $known = ['version', 'database_url', 'state_dir', 'cwd', 'auto_migrate', 'lease', 'shutdown_grace', 'poll_interval', 'postgres_user', 'max_frame_bytes', 'user', 'reload_command', 'restart_failures', 'restart_pause', 'failed_retention_days', 'record_metrics', 'metrics_trim', 'history_minutes', 'metrics_listen', 'long_waits', 'queue_budgets', 'pools'];
        $knownPool = ['name', 'queues', 'processes', 'prefetch', 'timeout', 'outage_grace', 'command', 'cwd', 'env', 'memory', 'nice', 'boot_timeout', 'balance', 'min_processes', 'max_processes', 'balance_max_shift', 'balance_cooldown', 'autoscaling_strategy', 'scale_down_delay', 'spawn', 'zygote_command'];
        $contract = Exporter::contract(self::shipped(), 'production', '/usr/bin/php', '/srv/app/artisan', '/srv/app');
        $this->assertSame([], array_values(array_diff(array_keys($contract), $known)), 'keys drover 0.2.0 refuses');
        $this->assertNotSame([], $contract['pools']);
        foreach ($contract['pools'] as $pool) {
            $this->assertSame([], array_values(array_diff(array_keys($pool), $knownPool)), 'pool keys drover 0.2.0 refuses');
        }
        $this->assertSame(['thresholds', 'command', 'cooldown'], array_keys($contract['long_waits']));
        // Set to another value, it is written (and refused by a 0.2 binary: a new option is used
        // once every host's binary knows it).
        $this->assertSame(120, Exporter::contract(['snapshot_alert' => 120] + self::shipped(), 'production', '/usr/bin/php', '/srv/app/artisan', '/srv/app')['snapshot_alert_secs']);
    }
}
