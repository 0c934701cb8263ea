<?php

namespace Drover\Config;

/**
 * Converts Laravel Horizon's config/horizon.php into a complete config/drover.php that runs, in
 * every environment, the pools Horizon would run there. Plain arrays in, PHP source out, no
 * Laravel needed, so every rule is unit-tested; `php artisan drover:import-horizon` reads the
 * files and writes the result.
 *
 * How: each supervisor of Horizon's `defaults` and `environments` becomes a drover pool of the same
 * name, its options renamed to drover's keys where they are written. Horizon and drover apply
 * defaults to environments alike (Pools), but not identically — Horizon merges lists index by
 * index, switches a supervisor off with maxProcesses 0, defaults `tries` to unlimited — so the
 * importer then computes, for every entry, the pools Horizon would run (its own merge, its own
 * defaults) and writes into that entry whatever drover would otherwise get differently. The
 * written file is equivalent by construction, and checked with Pools entry by entry.
 *
 * What cannot be carried over is listed by notCarriedOver() (and written into the file's header),
 * behaviour that differs or was rewritten by remarks(); values drover refuses (out of its range,
 * or a balance it does not know) are problems(), and then nothing should be written: they are
 * named, never clamped.
 */
final class HorizonImporter
{
    /**
     * What Horizon uses for an option a supervisor does not set (SupervisorOptions' constructor
     * and the horizon:supervisor command), for the options drover carries over: the file must run
     * what Horizon ran, not drover's defaults (which differ for `tries`: Horizon's 0 is unlimited).
     */
    private const HORIZON_DEFAULTS = [
        'balance' => 'off',
        'maxProcesses' => 1,
        'minProcesses' => 1,
        'memory' => 128,
        'timeout' => 60,
        'sleep' => 3,
        'maxTries' => 0,
        'force' => false,
        'nice' => 0,
        'balanceCooldown' => 3,
        'balanceMaxShift' => 1,
        'rest' => 0,
        'autoScalingStrategy' => 'time',
        'backoff' => 0,
        'maxTime' => 0,
        'maxJobs' => 0,
    ];

    /**
     * Horizon's supervisor option (camelCase, after Horizon's own renames of tries and processes)
     * => drover's pool key of the same meaning. `connection` and `maxProcesses` are converted
     * apart: every drover pool works drover's connection, and maxProcesses is `processes` or
     * `max_processes` depending on the balance.
     */
    private const RENAMED = [
        'queue' => 'queue',
        'balance' => 'balance',
        'autoScalingStrategy' => 'autoscaling_strategy',
        'minProcesses' => 'min_processes',
        'balanceMaxShift' => 'balance_max_shift',
        'balanceCooldown' => 'balance_cooldown',
        'maxTime' => 'max_time',
        'maxJobs' => 'max_jobs',
        'memory' => 'memory',
        'maxTries' => 'tries',
        'timeout' => 'timeout',
        'nice' => 'nice',
        'backoff' => 'backoff',
        'sleep' => 'sleep',
        'force' => 'force',
        'rest' => 'rest',
    ];

    /** Supervisor options Horizon knows that have no drover pool key, and why. */
    private const OPTIONS_NOT_CARRIED = [
        'workersName' => "the name Horizon gives a supervisor's workers; drover's workers are named after their pool (drover:POOL)",
        'parentId' => "Horizon sets it to its master's PID itself; drover's master starts and watches its workers directly",
        'directory' => "drover starts every worker in the application's directory (drover.app_path)",
        'name' => 'Horizon names supervisors itself (MASTER:KEY); a drover pool is named after its key',
        'delay' => 'deprecated by Horizon in favour of backoff, and not passed on by it',
    ];

    /** config/horizon.php's settings besides the supervisors, and why drover has nothing for them. */
    private const SETTINGS_NOT_CARRIED = [
        'domain' => "the dashboard's domain: set drover.dashboard.domain",
        'path' => "the dashboard's URI path: set drover.dashboard.path (drover's is /drover)",
        'middleware' => "the dashboard's route middleware: set drover.dashboard.middleware; the viewHorizon gate becomes viewDrover",
        'use' => 'the redis connection Horizon keeps its own data in: drover keeps its state in PostgreSQL (the drover schema)',
        'prefix' => "Horizon's redis key prefix: drover keeps its state in PostgreSQL (the drover schema)",
        'waits' => 'long-wait notifications: copy it to drover.waits, same form (connection:queue => seconds); drover fires Drover\\Events\\LongWaitDetected and notifies the routes set with Drover::routeMailNotificationsTo() / routeSlackNotificationsTo()',
        'trim' => 'how long recent jobs are kept: drover.metrics.history (minutes of completed jobs) and drover.metrics.trim (minutes of metrics); failed jobs stay in failed_jobs as with queue:work',
        'silenced' => 'jobs left out of the dashboard: drover shows every job',
        'silenced_tags' => 'tags left out of the dashboard: drover shows every job',
        'metrics' => 'the metrics snapshots (horizon:snapshot): the drover master records metrics per minute itself (drover.metrics; docs/metrics.md), no schedule needed',
        'fast_termination' => 'drover has no such setting: drover:terminate stops the master gracefully, running jobs get drover.shutdown_grace to finish',
        'memory_limit' => "the Horizon master's own memory limit: drover's master is a Rust process with no such limit (each pool's memory limits its workers)",
        'env' => 'the environment Horizon provisions instead of APP_ENV: drover provisions the application environment (APP_ENV)',
    ];

    /** Pool keys drover uses only when balance is auto: compared only for auto pools. */
    private const AUTO_ONLY = ['min_processes', 'balance_max_shift', 'balance_cooldown', 'autoscaling_strategy', 'scale_down_delay'];

    /** @var array<string, array<string, mixed>> drover.defaults as it will be written */
    private array $defaults = [];

    /** @var array<array-key, array<string, array<string, mixed>>> drover.environments as it will be written */
    private array $environments = [];

    /** @var array<string, array<string, string>> "defaults/POOL" or "environments/ENTRY/POOL" => key => a comment written after the value */
    private array $comments = [];

    /** @var array<string, array<string, string>> the same paths => drover key => the Horizon option it came from */
    private array $origins = [];

    /** @var array<array-key, string> Horizon supervisor name => drover pool name */
    private array $names = [];

    /** @var list<string> */
    private array $notCarried = [];

    /** @var list<string> */
    private array $remarks = [];

    /** @var list<string> */
    private array $problems = [];

    /** @var array<string, list<string>> a connection other than drover => where it was used */
    private array $connections = [];

    /**
     * @param array<string, mixed> $horizon config/horizon.php's array (config('horizon'))
     * @param array<string, mixed> $queueConnections config('queue.connections'): a supervisor
     *        without a queue works its connection's default queue in Horizon, so the import
     *        writes that queue out
     */
    public function __construct(array $horizon, private array $queueConnections = [])
    {
        foreach ($horizon as $key => $value) {
            if ($key === 'defaults' || $key === 'environments') {
                continue;
            }
            $this->notCarried[] = "$key: " . (self::SETTINGS_NOT_CARRIED[$key] ?? 'not a setting drover has');
        }
        $defaults = $horizon['defaults'] ?? [];
        $environments = $horizon['environments'] ?? [];
        if (!$this->checkShape($defaults, $environments)) {
            return;
        }
        $this->nameSupervisors($defaults, $environments);
        if ($this->problems !== []) {
            return;
        }
        $this->convertDefaults($defaults);
        $this->convertEntries($defaults, $environments);
        $this->checkValues();
        if ($this->problems !== []) {
            return;
        }
        $this->leaveOutSwitchedOff($defaults, $environments);
        $this->matchHorizon($defaults, $environments);
        $this->remarkOnEnvironments($environments);
        $this->remarkOnConnections();
        $this->validate();
    }

    /** @return array<string, array<string, mixed>> drover.defaults */
    public function defaults(): array
    {
        return $this->defaults;
    }

    /** @return array<array-key, array<string, array<string, mixed>>> drover.environments */
    public function environments(): array
    {
        return $this->environments;
    }

    /** @return array{defaults: array<string, array<string, mixed>>, environments: array<array-key, array<string, array<string, mixed>>>} the pools part of config/drover.php, as Pools reads it */
    public function pools(): array
    {
        return ['defaults' => $this->defaults, 'environments' => $this->environments];
    }

    /** @return list<string> Horizon settings and options the file cannot carry over, each with why */
    public function notCarriedOver(): array
    {
        return $this->notCarried;
    }

    /** @return list<string> where drover behaves differently, or the import rewrote something */
    public function remarks(): array
    {
        return $this->remarks;
    }

    /** @return list<string> values drover refuses; when any, nothing should be written */
    public function problems(): array
    {
        return $this->problems;
    }

    /**
     * The complete config/drover.php: a header saying where it came from and what was not
     * carried over, the package's top-level settings exactly as the package ships them (its
     * comments and env() calls, read from $shippedConfig so they never drift), then the imported
     * pools. Only call it when problems() is empty.
     *
     * @param string $date when the import ran (Y-m-d), for the header
     * @param string $source the file imported, for the header
     * @param string|null $shippedConfig the package's config/drover.php (default: this package's)
     */
    public function render(string $date, string $source = 'config/horizon.php', ?string $shippedConfig = null): string
    {
        if ($this->problems !== []) {
            throw new \LogicException('HorizonImporter::render: the import has problems; name them instead of writing a file');
        }
        $shippedConfig ??= dirname(__DIR__, 2) . '/config/drover.php';
        $out = "<?php\n\n";
        $out .= self::commentBlock("config/drover.php, imported from $source by `php artisan drover:import-horizon` on $date. The package's config/drover.php documents every key. Horizon's supervisors are the pools below, under the same names and in the same environments; drover-only pool keys (prefetch, boot_timeout, scale_down_delay) keep drover's defaults.", '');
        $out .= "//\n";
        $out .= self::commentBlock("These pools run the jobs of the `drover` queue connection: QUEUE_CONNECTION must become drover, and config/queue.php needs 'drover' => ['driver' => 'drover', 'connection' => 'pgsql', 'queue' => 'default'] (its connection: your PostgreSQL connection). Jobs already pushed to redis are not moved: let Horizon drain them first.", '');
        if ($this->notCarried !== []) {
            $out .= "//\n// Not carried over from $source:\n";
            foreach ($this->notCarried as $line) {
                $out .= self::commentBlock($line, '', '  - ');
            }
        }
        if ($this->remarks !== []) {
            $out .= "//\n// Differences, and what the import rewrote:\n";
            foreach ($this->remarks as $line) {
                $out .= self::commentBlock($line, '', '  - ');
            }
        }
        $out .= "\nreturn [";
        $out .= self::shippedSettings($shippedConfig);
        $out .= "\n\n";
        $out .= self::commentBlock("The pools by name (Horizon's `defaults`). Every key is optional; a missing key takes the default the package's config/drover.php documents.", '    ');
        $out .= "    'defaults' => " . $this->renderPools($this->defaults, 'defaults', '    ') . ",\n\n";
        $out .= self::commentBlock("Which pools run where, by Horizon's rules: the first entry (in this order) whose key matches the application's environment runs — `*` stands for any characters, as Str::is matches — with every pool of `defaults` and the entry's options for it on top, plus the entry's own pools. An environment that no entry matches runs no workers.", '    ');
        $out .= "    'environments' => ";
        if ($this->environments === []) {
            $out .= "[]";
        } else {
            $out .= "[\n";
            foreach ($this->environments as $entry => $pools) {
                $out .= '        ' . self::export($entry) . ' => ' . $this->renderPools($pools, "environments/$entry", '        ') . ",\n";
            }
            $out .= '    ]';
        }
        $out .= ",\n];\n";
        return $out;
    }

    /**
     * Horizon's supervisor options in Horizon's own terms: keys camelCased (Horizon accepts
     * max_processes as well as maxProcesses), `tries` read as maxTries and `processes` as
     * maxProcesses, as ProvisioningPlan::convert does; a later key wins over an earlier alias.
     *
     * @param array<array-key, mixed> $raw one supervisor as written
     * @param array<string, string> $written filled with option => the key as written
     * @return array<string, mixed>
     */
    public static function horizonOptions(array $raw, ?array &$written = null): array
    {
        $options = [];
        $written = [];
        foreach ($raw as $key => $value) {
            $key = (string) $key;
            $camel = match ($key) {
                'tries' => 'maxTries',
                'processes' => 'maxProcesses',
                default => lcfirst(str_replace(' ', '', ucwords(str_replace(['-', '_'], ' ', $key)))),
            };
            $options[$camel] = $value;
            $written[$camel] = $key;
        }
        return $options;
    }

    /** Horizon's balance as drover's: false, null, '' and 'off' are one set of workers; null when drover has no equivalent. */
    private static function balance(mixed $value): ?string
    {
        if ($value === false || $value === null || $value === '' || $value === 'off') {
            return 'off';
        }
        return in_array($value, ['simple', 'auto'], true) ? $value : null;
    }

    /** Whether Horizon leaves this supervisor out: it deploys only supervisors whose maxProcesses is above 0. */
    private static function switchedOff(array $options): bool
    {
        $max = array_key_exists('maxProcesses', $options) ? $options['maxProcesses'] : self::HORIZON_DEFAULTS['maxProcesses'];
        return is_numeric($max) && $max <= 0;
    }

    /**
     * Horizon's defaults and environments must be arrays down to each supervisor's options (its
     * ProvisioningPlan fails on anything else too); every place that is not is named. An import
     * of no supervisor at all is refused rather than written as a config that runs nothing.
     *
     * @param mixed $defaults
     * @param mixed $environments
     */
    private function checkShape($defaults, $environments): bool
    {
        if (!is_array($defaults)) {
            $this->problems[] = 'config/horizon.php defaults is ' . get_debug_type($defaults) . ': it must be an array of supervisors';
        }
        if (!is_array($environments)) {
            $this->problems[] = 'config/horizon.php environments is ' . get_debug_type($environments) . ': it must be an array of environments, each an array of supervisors';
        }
        if ($this->problems !== []) {
            return false;
        }
        foreach ($defaults as $name => $supervisor) {
            if (!is_array($supervisor)) {
                $this->problems[] = "config/horizon.php defaults.$name is " . get_debug_type($supervisor) . ': a supervisor must be an array of options';
            }
        }
        foreach ($environments as $entry => $supervisors) {
            if (!is_array($supervisors)) {
                $this->problems[] = "config/horizon.php environments.$entry is " . get_debug_type($supervisors) . ': an environment must be an array of supervisors';
                continue;
            }
            foreach ($supervisors as $name => $supervisor) {
                if (!is_array($supervisor)) {
                    $this->problems[] = "config/horizon.php environments.$entry.$name is " . get_debug_type($supervisor) . ': a supervisor must be an array of options';
                }
            }
        }
        if ($this->problems === [] && $defaults === [] && array_filter($environments) === []) {
            $this->problems[] = 'config/horizon.php defines no supervisors (defaults and environments are empty): there is nothing to import';
        }
        return $this->problems === [];
    }

    /** Supervisor names become pool names; drover allows letters, digits, '_', '.' and '-', so others are replaced (and said). */
    private function nameSupervisors(array $defaults, array $environments): void
    {
        $all = array_keys($defaults);
        foreach ($environments as $supervisors) {
            $all = array_merge($all, array_keys($supervisors));
        }
        $taken = [];
        foreach (array_unique(array_map('strval', $all)) as $name) {
            $pool = trim((string) preg_replace('/[^A-Za-z0-9_.-]+/', '-', $name), '-');
            $pool = $pool === '' ? 'pool' : $pool;
            if (isset($taken[$pool])) {
                $this->problems[] = "config/horizon.php supervisors '{$taken[$pool]}' and '$name' would both become drover pool '$pool' (a pool name may use letters, digits, '_', '.' and '-' only): rename one";
                continue;
            }
            $taken[$pool] = $name;
            $this->names[$name] = $pool;
            if ($pool !== $name) {
                $this->remarks[] = "supervisor '$name' is pool '$pool': a drover pool name may use letters, digits, '_', '.' and '-' only";
            }
        }
    }

    /**
     * One supervisor's options, as written in one place, in drover's keys. maxProcesses goes to
     * `processes` (balance off: the number of workers; simple: split between the queues) or, for
     * balance auto, to `max_processes` (the most workers in all), as Horizon uses it per mode;
     * a maxProcesses of 0 or less is left to leaveOutSwitchedOff().
     *
     * @param array<string, mixed> $options horizonOptions() of the supervisor there
     * @param array<string, string> $written option => the key as written
     * @param string $balance drover's balance the supervisor has there once defaults are applied
     * @param string $path "defaults/POOL" or "environments/ENTRY/POOL"
     * @param string $where where it is in config/horizon.php, for messages
     * @return array<string, mixed>
     */
    private function convert(array $options, array $written, string $balance, string $path, string $where): array
    {
        $pool = [];
        foreach ($options as $option => $value) {
            $key = $written[$option] ?? $option;
            if ($option === 'connection') {
                $pool['connection'] = 'drover';
                if ($value !== 'drover') {
                    $this->connections[(string) (is_scalar($value) ? $value : get_debug_type($value))][] = $where;
                    $this->comments[$path]['connection'] = 'Horizon: ' . self::export($value);
                }
            } elseif ($option === 'maxProcesses') {
                if (is_numeric($value) && $value <= 0) {
                    continue;
                }
                $target = $balance === 'auto' ? 'max_processes' : 'processes';
                $pool[$target] = $value;
                $this->origins[$path][$target] = $key;
            } elseif ($option === 'balance') {
                if (self::balance($value) === null) {
                    $this->problems[] = "config/horizon.php $where.$key = " . self::export($value) . ': drover knows balance false (or off), simple and auto; set one of them';
                    continue;
                }
                $pool['balance'] = self::balance($value);
                $this->origins[$path]['balance'] = $key;
            } elseif ($option === 'queue' && ($value === '' || $value === [] || $value === null)) {
                continue;
            } elseif (isset(self::RENAMED[$option])) {
                $target = self::RENAMED[$option];
                if ($option === 'queue' && is_string($value)) {
                    $value = array_values(array_filter(array_map('trim', explode(',', $value)), fn ($q) => $q !== ''));
                } elseif (is_array($value)) {
                    $value = array_values($value);
                }
                $pool[$target] = $value;
                $this->origins[$path][$target] = $key;
            } else {
                $why = self::OPTIONS_NOT_CARRIED[$option] ?? 'not a Horizon supervisor option, so Horizon ignores it too';
                $this->notCarried[] = "$where.$key: $why";
            }
        }
        return $pool;
    }

    /**
     * The options a supervisor has where Horizon does not set them itself and drover's defaults
     * would differ: tries (Horizon: 0, unlimited; drover: 1) and the queue (Horizon: the
     * connection's default queue). Added where a supervisor is first defined, so an entry that
     * sets them still wins.
     *
     * @param array<string, mixed> $options horizonOptions() of the supervisor there
     * @param array<string, mixed> $pool its conversion so far
     * @return array<string, mixed>
     */
    private function withHorizonDefaults(array $options, array $pool, string $path, string $where): array
    {
        $pool = ['connection' => 'drover'] + $pool;
        if (!array_key_exists('maxTries', $options)) {
            $pool['tries'] = 0;
            $this->comments[$path]['tries'] = "Horizon's default: tries not set, unlimited attempts";
        }
        if (!isset($pool['queue'])) {
            $queue = $this->defaultQueue($options['connection'] ?? null);
            $pool['queue'] = [$queue];
            $this->comments[$path]['queue'] = 'Horizon: no queue, so its connection\'s default queue';
            $this->remarks[] = "$where has no queue: Horizon works its connection's default queue, '$queue', written out as its queue";
        }
        return $pool;
    }

    /** The queue Horizon works for a supervisor without one: its connection's `queue` in config/queue.php, else 'default' (as horizon:supervisor falls back). */
    private function defaultQueue(mixed $connection): string
    {
        $queue = is_string($connection) ? ($this->queueConnections[$connection]['queue'] ?? null) : null;
        return is_string($queue) && $queue !== '' ? $queue : 'default';
    }

    /** Horizon's defaults become drover.defaults, supervisor by supervisor. */
    private function convertDefaults(array $defaults): void
    {
        foreach ($defaults as $name => $supervisor) {
            $pool = $this->names[(string) $name];
            $path = "defaults/$pool";
            $options = self::horizonOptions($supervisor, $written);
            $converted = $this->convert($options, $written, self::balance($options['balance'] ?? 'off') ?? 'off', $path, "defaults.$name");
            $this->defaults[$pool] = $this->withHorizonDefaults($options, $converted, $path, "defaults.$name");
        }
    }

    /**
     * Each environment's supervisors become that entry's pools: the options it writes, converted
     * with the balance the supervisor has there once Horizon's defaults are applied.
     */
    private function convertEntries(array $defaults, array $environments): void
    {
        foreach ($environments as $entry => $supervisors) {
            $this->environments[$entry] = [];
            $merged = array_replace_recursive($defaults, $supervisors);
            foreach ($supervisors as $name => $supervisor) {
                $pool = $this->names[(string) $name];
                $path = "environments/$entry/$pool";
                $balance = self::balance(self::horizonOptions($merged[$name])['balance'] ?? 'off') ?? 'off';
                $options = self::horizonOptions($supervisor, $written);
                $converted = $this->convert($options, $written, $balance, $path, "environments.$entry.$name");
                if (!array_key_exists($name, $defaults)) {
                    $converted = $this->withHorizonDefaults($options, $converted, $path, "environments.$entry.$name");
                }
                $this->environments[$entry][$pool] = $converted;
            }
        }
    }

    /**
     * Every value checked on its own, where it is written, so a value drover refuses is named with
     * the place in config/horizon.php it came from (merged-pool checks follow in matchHorizon()).
     */
    private function checkValues(): void
    {
        $places = [];
        foreach ($this->defaults as $pool => $options) {
            $places["defaults/$pool"] = $options;
        }
        foreach ($this->environments as $entry => $pools) {
            foreach ($pools as $pool => $options) {
                $places["environments/$entry/$pool"] = $options;
            }
        }
        foreach ($places as $path => $options) {
            foreach ($options as $key => $value) {
                if (!isset($this->origins[$path][$key])) {
                    continue;
                }
                try {
                    Pools::entry(['environments' => ['check' => ['check' => [$key => $value]]]], 'check');
                } catch (InvalidConfig $e) {
                    $where = $this->horizonPath($path) . '.' . $this->origins[$path][$key];
                    foreach ($e->problems as $problem) {
                        $this->problems[] = "config/horizon.php $where = " . self::export($value) . ": drover refuses it ($key " . preg_replace('/^pool check: ' . preg_quote($key, '/') . ' /', '', $problem) . ')';
                    }
                }
            }
        }
    }

    /** "environments/production/supervisor-1" => "environments.production.supervisor-1", with the supervisor's name as Horizon wrote it. */
    private function horizonPath(string $path): string
    {
        $parts = explode('/', $path);
        $pool = array_pop($parts);
        $name = array_search($pool, $this->names, true);
        return implode('.', $parts) . '.' . ($name === false ? $pool : $name);
    }

    /**
     * Horizon deploys only supervisors whose maxProcesses is above 0 (its way to switch a default
     * supervisor off in one environment). drover has no such switch: such a pool is left out of
     * that entry, and a defaults pool switched off somewhere leaves drover.defaults for the
     * entries where it does run.
     */
    private function leaveOutSwitchedOff(array $defaults, array $environments): void
    {
        $off = [];
        foreach ($environments as $entry => $supervisors) {
            foreach (array_replace_recursive($defaults, $supervisors) as $name => $supervisor) {
                if (self::switchedOff(self::horizonOptions($supervisor))) {
                    $off[(string) $name][] = (string) $entry;
                    unset($this->environments[$entry][$this->names[(string) $name]]);
                }
            }
        }
        foreach ($off as $name => $entries) {
            $pool = $this->names[$name];
            $this->remarks[] = "supervisor $name has maxProcesses 0 in " . implode(', ', $entries) . ': Horizon does not start it there, so that pool is left out there';
            if (!isset($this->defaults[$pool])) {
                continue;
            }
            $base = $this->defaults[$pool];
            $baseComments = $this->comments["defaults/$pool"] ?? [];
            unset($this->defaults[$pool]);
            $runs = [];
            foreach ($environments as $entry => $supervisors) {
                if (in_array((string) $entry, $entries, true)) {
                    continue;
                }
                $runs[] = (string) $entry;
                $this->environments[$entry][$pool] = array_merge($base, $this->environments[$entry][$pool] ?? []);
                $this->comments["environments/$entry/$pool"] = array_merge($baseComments, $this->comments["environments/$entry/$pool"] ?? []);
            }
            $this->remarks[] = "pool $pool is not in drover.defaults but in each entry where it runs (" . ($runs === [] ? 'none' : implode(', ', $runs)) . '): drover cannot switch a defaults pool off in one environment';
        }
    }

    /**
     * For every entry, the pools Horizon would run (its array_replace_recursive merge, its
     * defaults) against the pools drover would run from the file so far; every difference is
     * written into that entry, then checked again. Also where the differences between the two
     * schedulers are worth a remark.
     */
    private function matchHorizon(array $defaults, array $environments): void
    {
        $idleOff = [];
        $auto = [];
        foreach ($environments as $entry => $supervisors) {
            $expected = [];
            foreach (array_replace_recursive($defaults, $supervisors) as $name => $supervisor) {
                $options = self::horizonOptions($supervisor);
                if (!self::switchedOff($options)) {
                    $expected[$this->names[(string) $name]] = $this->horizonPool($options);
                }
            }
            try {
                $want = Pools::entry(['environments' => [$entry => $expected]], (string) $entry);
            } catch (InvalidConfig $e) {
                foreach ($e->problems as $problem) {
                    $this->problems[] = "config/horizon.php environments.$entry (with defaults applied): drover refuses $problem";
                }
                continue;
            }
            try {
                $have = Pools::entry($this->pools(), (string) $entry);
            } catch (InvalidConfig $e) {
                // The options as written do not combine into valid pools here (say a balance
                // from one place, processes from another): write this entry's pools out whole.
                $have = [];
            }
            foreach ($want as $pool => $options) {
                $name = (string) array_search($pool, $this->names, true);
                $this->environments[$entry][$pool] ??= [];
                $had = isset($have[$pool]) ? self::effective($have[$pool]) : [];
                foreach (self::effective($options) as $key => $value) {
                    if (array_key_exists($key, $had) && $had[$key] == $value) {
                        continue;
                    }
                    if ($key === 'workers') {
                        $key = $options['balance'] === 'auto' ? 'max_processes' : 'processes';
                    }
                    $this->environments[$entry][$pool][$key] = $value;
                    if (in_array($key, ['queue', 'backoff'], true) && isset($defaults[$name]) && is_array(self::horizonOptions($supervisors[$name] ?? [])[$key] ?? null) && is_array(self::horizonOptions($defaults[$name])[$key] ?? null)) {
                        $this->comments["environments/$entry/$pool"][$key] = 'as Horizon merges it with the default list, index by index';
                        $this->remarks[] = "environments.$entry.$name.$key: Horizon merges this list with defaults.$name.$key index by index, giving " . self::export($value) . '; drover replaces a list whole, so that list is written out';
                    }
                }
                if ($this->environments[$entry][$pool] === [] && isset($have[$pool])) {
                    unset($this->environments[$entry][$pool]);
                }
                if ($options['balance'] === 'off' && $options['min_processes'] < $options['processes']) {
                    $idleOff[$name]["minProcesses {$options['min_processes']}, maxProcesses {$options['processes']}"][] = (string) $entry;
                }
                if ($options['balance'] === 'auto') {
                    $auto[$name] = true;
                }
            }
            try {
                $now = Pools::entry($this->pools(), (string) $entry);
            } catch (InvalidConfig $e) {
                $now = null;
            }
            if ($now === null || array_map(self::effective(...), $now) != array_map(self::effective(...), $want)) {
                $this->problems[] = "drover:import-horizon could not reproduce Horizon's pools for environments.$entry; please report this with your config/horizon.php";
            }
        }
        foreach ($idleOff as $name => $ranges) {
            $where = implode('; ', array_map(fn ($range, $entries) => implode(', ', $entries) . " ($range)", array_keys($ranges), $ranges));
            $this->remarks[] = "supervisor $name has balance off with minProcesses below maxProcesses in $where: Horizon (5.26 and later) shrinks an idle balance-off supervisor to minProcesses and grows it back when jobs wait; drover's balance off always runs `processes` workers (use balance auto to scale)";
        }
        if ($auto !== []) {
            $this->remarks[] = 'balance auto (' . implode(', ', array_keys($auto)) . '): drover takes a worker from a queue only after the queue has wanted fewer for scale_down_delay (10 s), Horizon at its next balanceCooldown; set \'scale_down_delay\' => 0 for Horizon\'s pace';
        }
    }

    /**
     * The drover pool that runs what Horizon runs for these options (defaults applied): every
     * option Horizon has, with Horizon's own value where the supervisor sets none.
     *
     * @param array<string, mixed> $options horizonOptions() of the merged supervisor
     * @return array<string, mixed>
     */
    private function horizonPool(array $options): array
    {
        $balance = self::balance($options['balance'] ?? 'off') ?? 'off';
        $pool = ['connection' => 'drover', 'balance' => $balance];
        foreach (self::RENAMED as $option => $key) {
            $pool[$key] = $options[$option] ?? self::HORIZON_DEFAULTS[$option] ?? null;
        }
        $pool['balance'] = $balance;
        if ($pool['queue'] === null || $pool['queue'] === '' || $pool['queue'] === []) {
            $pool['queue'] = [$this->defaultQueue($options['connection'] ?? null)];
        }
        $max = $options['maxProcesses'] ?? self::HORIZON_DEFAULTS['maxProcesses'];
        if ($balance === 'auto') {
            $pool['max_processes'] = $max;
        } else {
            $pool['processes'] = $max;
        }
        return $pool;
    }

    /**
     * What decides how a resolved pool runs: `workers` stands for processes (off, simple) or
     * max_processes falling back to processes (auto), and the autoscaling keys count only for
     * auto pools.
     *
     * @param array<string, mixed> $pool a pool from Pools
     * @return array<string, mixed>
     */
    private static function effective(array $pool): array
    {
        $pool['workers'] = $pool['balance'] === 'auto' ? ($pool['max_processes'] ?? $pool['processes']) : $pool['processes'];
        unset($pool['processes'], $pool['max_processes']);
        if ($pool['balance'] !== 'auto') {
            foreach (self::AUTO_ONLY as $key) {
                unset($pool[$key]);
            }
        }
        return $pool;
    }

    /**
     * The pools as they will be written, checked as drover will check them: every entry on its
     * own (Pools::entry), and through Pools::resolve for every entry named after one environment
     * (not a pattern) that is its own first match. A failure here is a bug of the importer.
     */
    private function validate(): void
    {
        if ($this->problems !== []) {
            return;
        }
        $config = $this->pools();
        foreach (array_keys($this->environments) as $entry) {
            $entry = (string) $entry;
            try {
                Pools::entry($config, $entry);
                if (!str_contains($entry, '*') && Pools::matchedEnvironment($config, $entry) === $entry) {
                    Pools::resolve($config, $entry);
                }
            } catch (InvalidConfig $e) {
                $this->problems[] = "drover:import-horizon wrote pools for environments.$entry that drover refuses (please report this with your config/horizon.php): " . implode('; ', $e->problems);
            }
        }
    }

    /** Entries Horizon (and drover) can never pick for their own name, and the case of no entries at all. */
    private function remarkOnEnvironments(array $environments): void
    {
        if ($environments === []) {
            $this->remarks[] = "config/horizon.php has no environments: Horizon runs no supervisor anywhere, and neither will drover; add an entry such as '*' => [] to config/drover.php to run the defaults everywhere";
            return;
        }
        $keys = array_map('strval', array_keys($environments));
        foreach ($keys as $i => $key) {
            foreach (array_slice($keys, 0, $i) as $earlier) {
                if ($earlier === '*' || (!str_contains($key, '*') && Pools::matches($earlier, $key))) {
                    $this->remarks[] = "environments.$key is never used for environment '$key': the earlier entry '$earlier' matches first (Horizon's rule too; put specific entries first)";
                    break;
                }
            }
        }
    }

    /**
     * Every supervisor's connection became drover's; say which ones were something else (their
     * jobs stay there) and, when several, that their queues now meet in one connection.
     */
    private function remarkOnConnections(): void
    {
        if ($this->connections === []) {
            return;
        }
        foreach ($this->connections as $connection => $where) {
            $this->remarks[] = "connection '$connection' (" . implode(', ', array_unique($where)) . "): written as 'connection' => 'drover', since drover pools run the jobs of drover's own queue connection; jobs already on '$connection' are not moved (let Horizon drain them)";
        }
        if (count($this->connections) > 1) {
            $this->remarks[] = 'supervisors of different connections (' . implode(', ', array_keys($this->connections)) . ') now share drover\'s connection: a queue name they both used is one queue now';
        }
    }

    /**
     * The package's top-level settings besides defaults and environments, as its config/drover.php
     * writes them (comments and env() calls included): each entry of the returned array, with
     * the comments above it, copied from the source. Shared with SupervisorImporter, which puts
     * the values it imported in place of the shipped ones: $values is key => PHP source of the
     * value (the comments above the entry are kept).
     *
     * @param array<string, string> $values
     */
    public static function shippedSettings(string $path, array $values = []): string
    {
        $source = @file_get_contents($path);
        if ($source === false) {
            throw new \RuntimeException("drover/laravel: cannot read the package's config/drover.php at $path");
        }
        $tokens = \PhpToken::tokenize($source);
        $i = 0;
        while ($i < count($tokens) && !$tokens[$i]->is(T_RETURN)) {
            $i++;
        }
        while ($i < count($tokens) && $tokens[$i]->text !== '[') {
            $i++;
        }
        if ($i >= count($tokens)) {
            throw new \RuntimeException("drover/laravel: $path does not return an array");
        }
        $kept = '';
        $entry = '';
        $key = null;
        $arrow = null;
        $depth = 0;
        for ($i++; $i < count($tokens); $i++) {
            $token = $tokens[$i];
            $text = $token->text;
            if ($depth === 0 && ($text === ',' || $text === ']')) {
                if ($key !== null && $key !== 'defaults' && $key !== 'environments') {
                    if (isset($values[$key]) && $arrow !== null) {
                        $entry = substr($entry, 0, $arrow) . '=> ' . $values[$key];
                    }
                    $kept .= $entry . ',';
                }
                if ($text === ']') {
                    break;
                }
                $entry = '';
                $key = null;
                $arrow = null;
                continue;
            }
            if ($depth === 0 && $arrow === null && $token->is(T_DOUBLE_ARROW)) {
                $arrow = strlen($entry);
            }
            if (in_array($text, ['[', '(', '{'], true) || $token->is([T_CURLY_OPEN, T_DOLLAR_OPEN_CURLY_BRACES])) {
                $depth++;
            } elseif (in_array($text, [']', ')', '}'], true)) {
                $depth--;
            }
            if ($key === null && $depth === 0 && !$token->isIgnorable()) {
                $key = $token->is(T_CONSTANT_ENCAPSED_STRING) ? substr($text, 1, -1) : $text;
            }
            $entry .= $text;
        }
        return $kept;
    }

    /**
     * Pools as PHP source, one option per line with the comment that says where a value came from
     * (a connection that was redis, a Horizon default written out), so the file reads as config.
     *
     * @param array<string, array<string, mixed>> $pools
     */
    private function renderPools(array $pools, string $path, string $indent): string
    {
        if ($pools === []) {
            return '[]';
        }
        $out = "[\n";
        foreach ($pools as $pool => $options) {
            $out .= "$indent    " . self::export($pool) . ' => ';
            if ($options === []) {
                $out .= "[],\n";
                continue;
            }
            $out .= "[\n";
            foreach ($options as $key => $value) {
                $comment = $this->comments["$path/$pool"][$key] ?? null;
                $out .= "$indent        " . self::export($key) . ' => ' . self::export($value) . ',' . ($comment === null ? '' : " // $comment") . "\n";
            }
            $out .= "$indent    ],\n";
        }
        return $out . "$indent]";
    }

    /** A value as PHP source: short arrays, lists of scalars on one line. */
    public static function export(mixed $value): string
    {
        if (!is_array($value)) {
            return $value === null ? 'null' : var_export($value, true);
        }
        if ($value === []) {
            return '[]';
        }
        if (array_is_list($value) && array_filter($value, fn ($v) => is_array($v)) === []) {
            return '[' . implode(', ', array_map([self::class, 'export'], $value)) . ']';
        }
        $items = [];
        foreach ($value as $k => $v) {
            $items[] = self::export($k) . ' => ' . self::export($v);
        }
        return '[' . implode(', ', $items) . ']';
    }

    /** Text as `//` comment lines of at most 100 columns, the first after $bullet, the rest aligned under it. */
    public static function commentBlock(string $text, string $indent, string $bullet = ''): string
    {
        $prefix = "$indent// ";
        $width = 100 - strlen($prefix) - strlen($bullet);
        $lines = explode("\n", wordwrap($text, max(40, $width), "\n", false));
        $out = '';
        foreach ($lines as $i => $line) {
            $out .= $prefix . ($i === 0 ? $bullet : str_repeat(' ', strlen($bullet))) . $line . "\n";
        }
        return $out;
    }
}
