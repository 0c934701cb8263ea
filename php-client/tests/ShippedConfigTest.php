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
}
