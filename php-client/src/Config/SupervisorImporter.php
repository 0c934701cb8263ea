<?php

namespace Drover\Config;

/**
 * Converts supervisord's program files — what Laravel Forge and the Laravel docs write for
 * `php artisan queue:work` — into a complete config/drover.php whose pools run the same workers.
 * Files in, PHP source out, no Laravel needed, so every rule is unit-tested; `php artisan
 * drover:import-supervisor` passes the files and the application's queue connections and writes
 * the result.
 *
 * How: the files are read as supervisord reads them (its configparser dialect: sections,
 * `key = value` or `key: value`, `;`/`#` comments, indented continuation lines, [include] files,
 * every file merged into one configuration) and each [program:NAME] is expanded as supervisord
 * expands it (`%(program_name)s`, `%(process_num)02d`, `%(ENV_X)s`, …) for each of its processes,
 * and its command split as supervisord splits it (shlex). A program whose command is
 * `php …/artisan queue:work` or `queue:listen` becomes the drover pool of the same name: numprocs
 * as processes, the queues in the order given, and each flag as the pool key of the same meaning
 * (queue:work's defaults are drover's, so a flag not given is a key not written). Anything else
 * is skipped, with why.
 *
 * Every program works one queue connection; a drover pool runs the jobs of a drover connection.
 * Programs on a drover connection keep it; every other connection (redis, database, sqs) is
 * written as the application's drover connection, as drover:import-horizon does, and said: the
 * point of the import is to move those workers to drover (`--connection` limits the import to
 * some connections, for a team that keeps, say, an SQS worker under supervisord).
 *
 * What has no drover equivalent is listed by notCarriedOver(), rewrites and differences by
 * remarks(), programs that are not queue workers by skipped(); input drover cannot take (an
 * unreadable file, a line that is no setting, a command line queue:work itself would refuse, a
 * value drover refuses) by problems(), each naming the file and line, and then nothing should be
 * written.
 */
final class SupervisorImporter
{
    /** queue:work's options (Laravel 8 to 12), true for those that take a value. */
    private const WORK_OPTIONS = [
        'name' => true, 'queue' => true, 'daemon' => false, 'once' => false, 'stop-when-empty' => false,
        'stop-when-empty-for' => true, 'delay' => true, 'backoff' => true, 'max-jobs' => true,
        'max-time' => true, 'force' => false, 'memory' => true, 'sleep' => true, 'rest' => true,
        'timeout' => true, 'tries' => true, 'json' => false,
    ];

    /** queue:listen's options (Laravel 8 to 12). */
    private const LISTEN_OPTIONS = [
        'name' => true, 'delay' => true, 'backoff' => true, 'force' => false, 'memory' => true,
        'queue' => true, 'sleep' => true, 'rest' => true, 'timeout' => true, 'tries' => true,
    ];

    /** Options every artisan command has (Symfony's and Laravel's --env). */
    private const GLOBAL_OPTIONS = [
        'env' => true, 'quiet' => false, 'verbose' => false, 'ansi' => false, 'no-ansi' => false,
        'no-interaction' => false, 'silent' => false, 'help' => false, 'version' => false,
    ];

    private const SHORT_OPTIONS = ['q' => 'quiet', 'v' => 'verbose', 'vv' => 'verbose', 'vvv' => 'verbose', 'n' => 'no-interaction', 'h' => 'help', 'V' => 'version'];

    /** Flag => the pool key of the same meaning (the values are checked as numbers). */
    private const FLAG_KEYS = [
        'tries' => 'tries', 'timeout' => 'timeout', 'memory' => 'memory', 'sleep' => 'sleep',
        'rest' => 'rest', 'max-jobs' => 'max_jobs', 'max-time' => 'max_time',
    ];

    /** The order pool keys are written in. */
    private const KEY_ORDER = ['connection', 'queue', 'processes', 'tries', 'timeout', 'memory', 'backoff', 'max_jobs', 'max_time', 'sleep', 'rest', 'force', 'nice'];

    /** queue:work flags with no pool key, and why. */
    private const FLAGS_NOT_CARRIED = [
        'name' => "the worker's name in Laravel's worker events; drover's workers are named after their pool (drover:POOL)",
        'daemon' => 'deprecated, and ignored by Laravel itself',
        'stop-when-empty' => "drover's workers wait for the master's next job and never stop on an empty queue (supervisord restarted this worker each time it stopped, so it ran as a waiting worker too)",
        'stop-when-empty-for' => "drover's workers wait for the master's next job and never stop on an empty queue (supervisord restarted this worker each time it stopped, so it ran as a waiting worker too)",
        'quiet' => "how the worker prints to its log: drover's workers report every job to the master, which logs it (docs/deploy.md, Logs)",
        'verbose' => "how the worker prints to its log: drover's workers report every job to the master, which logs it (docs/deploy.md, Logs)",
        'json' => "how the worker prints to its log: drover's workers report every job to the master, which logs it (docs/deploy.md, Logs; DROVER_LOG_JSON=1 for JSON lines)",
        'ansi' => "how the worker prints to its log: drover's workers report every job to the master, which logs it",
        'no-ansi' => "how the worker prints to its log: drover's workers report every job to the master, which logs it",
        'silent' => "how the worker prints to its log: drover's workers report every job to the master, which logs it",
        'no-interaction' => 'a worker never asks anything',
    ];

    /** Program settings with no drover equivalent, and why (each only when it says something drover does not do). */
    private const SETTINGS_NOT_CARRIED = [
        'environment' => "the workers' environment: drover's workers inherit the master's, so set these for `php artisan drover` (the systemd unit's Environment= or EnvironmentFile=, docs/deploy.md)",
        'logs' => "where supervisord wrote the worker's output: drover's workers' output goes to the master's log (journald under systemd: journalctl -u drover), and Laravel's log channel is the application's as before",
        'startsecs' => "drover counts a worker as started when it says hello within the pool's boot_timeout (60 s), and after restart_failures (5) failed starts in a row pauses the pool for restart_pause (30 s) before one probe: set those in config/drover.php",
        'exitcodes' => 'drover replaces every worker that exits, whatever its exit status',
        'autorestart' => "drover replaces every worker that exits (a planned exit at once, a crash with backoff): a worker that is not restarted has no equivalent",
        'autostart' => 'supervisord started it only when told (supervisorctl start); drover starts every pool of config/drover.php with the master: remove the pool if it should not run',
        'priority' => 'drover starts every pool at once',
        'umask' => "drover's workers keep the master's umask",
        'stopsignal' => 'drover stops a worker itself: it lets the running job finish within shutdown_grace, then kills the worker',
        'stopasgroup' => "drover sends a graceful stop to the worker alone, and kills the worker's whole process group only when it must (past a timeout or shutdown_grace)",
        'serverurl' => 'for supervisorctl; drover:status and drover:restart talk to the master over its control socket',
    ];

    /** Settings that are the same in drover by construction, or only name processes. */
    private const SETTINGS_SILENT = ['command', 'numprocs', 'numprocs_start', 'process_name', 'user', 'stopwaitsecs', 'directory', 'killasgroup'];

    private const LOG_SETTINGS = '/^(stdout|stderr)_(logfile|logfile_maxbytes|logfile_backups|capture_maxbytes|events_enabled|syslog)$|^redirect_stderr$/';

    /** supervisord's own default of stopwaitsecs. */
    private const STOPWAITSECS = 10;

    /** @var array<string, array<string, mixed>> drover.defaults as it will be written */
    private array $pools = [];

    /** @var array<string, array<string, string>> pool => key => a comment written after the value */
    private array $comments = [];

    /** @var array<string, string> top-level key => PHP source of its value, in place of the shipped one */
    private array $settings = [];

    /** @var array<string, string> top-level key => a comment written above it */
    private array $settingComments = [];

    /** @var array<string, array{0: string, 1: list<string>}> what was not carried => [why, where] */
    private array $notCarried = [];

    /** @var list<string> */
    private array $remarks = [];

    /** @var list<string> */
    private array $skipped = [];

    /** @var list<string> */
    private array $problems = [];

    /** @var list<string> every file read, includes too */
    private array $files = [];

    /** @var array<string, true> realpaths read */
    private array $read = [];

    /**
     * @var array<string, array{file: string, line: int, values: array<string, array{0: string, 1: string, 2: int}>}>
     *      "program:NAME" etc. => where it starts and its settings (key => [value, file, line])
     */
    private array $sections = [];

    /** @var array<string, string> program => the group it is in */
    private array $groups = [];

    /** @var array<string, list<string>> a connection other than a drover one => its programs */
    private array $connections = [];

    /** @var array<string, string> pool => where its program is ("FILE:LINE [program:NAME]") */
    private array $placeOf = [];

    /**
     * @param list<string> $paths supervisord files (a conf.d file, or supervisord.conf with its [include])
     * @param array<string, mixed> $queueConnections config('queue.connections')
     * @param string|null $defaultConnection config('queue.default'): what queue:work without a connection works
     * @param array{connections?: list<string>, directory?: string|null, base_path?: string|null, env?: array<string, string>, host?: string} $options
     *        connections: import only programs working these; directory: the application whose
     *        workers to import when the files run several (default: the only one, else base_path's);
     *        base_path: this application's; env: for %(ENV_X)s (default: this process's);
     *        host: %(host_node_name)s (default: this machine's)
     */
    public function __construct(array $paths, private array $queueConnections = [], private ?string $defaultConnection = null, private array $options = [])
    {
        if ($paths === []) {
            $this->problems[] = 'no supervisord file given: pass the files of your queue workers, e.g. /etc/supervisor/conf.d/*.conf (Forge writes one per worker there)';
            return;
        }
        foreach ($paths as $path) {
            $this->readFile($path, null);
        }
        if ($this->problems !== []) {
            return;
        }
        $this->readGroups();
        $workers = $this->programs();
        if ($this->problems !== []) {
            return;
        }
        $workers = $this->oneApplication($workers);
        if ($this->problems !== []) {
            return;
        }
        if ($workers === []) {
            $this->problems[] = 'no program of ' . implode(', ', $this->files) . ' runs `php artisan queue:work` or `queue:listen`' . ($this->skipped === [] ? '' : ' (skipped: ' . implode('; ', $this->skipped) . ')') . ': there is nothing to import; pass the files of your queue workers';
            return;
        }
        $this->convert($workers);
        if ($this->pools === [] && $this->problems === []) {
            $this->problems[] = 'no queue worker of ' . implode(', ', $this->files) . ' works the connections --connection selects (' . implode(', ', $this->options['connections'] ?? []) . '): there is nothing to import (skipped: ' . implode('; ', $this->skipped) . ')';
            return;
        }
        $this->validate();
    }

    /** @return array<string, array<string, mixed>> drover.defaults: the pools, by program name */
    public function defaults(): array
    {
        return $this->pools;
    }

    /** @return array<string, array<string, mixed>> drover.environments: the pools run everywhere, as supervisord ran them */
    public function environments(): array
    {
        return ['*' => []];
    }

    /** @return array{defaults: array<string, array<string, mixed>>, environments: array<string, array<string, mixed>>} the pools part of config/drover.php, as Pools reads it */
    public function pools(): array
    {
        return ['defaults' => $this->pools, 'environments' => $this->environments()];
    }

    /** @return array<string, string> top-level settings imported (key => PHP source of the value): user, shutdown_grace */
    public function settings(): array
    {
        return $this->settings;
    }

    /** @return list<string> flags and settings without a drover equivalent, each with why and where */
    public function notCarriedOver(): array
    {
        $lines = [];
        foreach ($this->notCarried as $what => [$why, $where]) {
            $lines[] = "$what (" . implode(', ', array_unique($where)) . "): $why";
        }
        return $lines;
    }

    /** @return list<string> where drover behaves differently, or the import rewrote something */
    public function remarks(): array
    {
        return $this->remarks;
    }

    /** @return list<string> programs that are not queue workers (or not selected), each with why */
    public function skipped(): array
    {
        return $this->skipped;
    }

    /** @return list<string> input drover cannot take; when any, nothing should be written */
    public function problems(): array
    {
        return $this->problems;
    }

    /** @return list<string> every file read, [include]d ones too */
    public function files(): array
    {
        return $this->files;
    }

    /**
     * The complete config/drover.php: a header saying where it came from and what was not
     * carried over, the package's top-level settings as it ships them (the imported user and
     * shutdown_grace in their place), then the pools. Only call it when problems() is empty.
     *
     * @param string $date when the import ran (Y-m-d), for the header
     * @param string|null $shippedConfig the package's config/drover.php (default: this package's)
     */
    public function render(string $date, ?string $shippedConfig = null): string
    {
        if ($this->problems !== []) {
            throw new \LogicException('SupervisorImporter::render: the import has problems; name them instead of writing a file');
        }
        $shippedConfig ??= dirname(__DIR__, 2) . '/config/drover.php';
        $out = "<?php\n\n";
        $out .= HorizonImporter::commentBlock('config/drover.php, imported from ' . implode(', ', $this->files) . " by `php artisan drover:import-supervisor` on $date. The package's config/drover.php documents every key. Each supervisord program that ran queue:work or queue:listen is a pool below, named after the program: numprocs is its processes, its flags the pool's options (queue:work's defaults are drover's, so a flag not given is a key not written); drover-only pool keys (prefetch, spawn, boot_timeout) keep drover's defaults.", '');
        $out .= "//\n";
        $out .= HorizonImporter::commentBlock("These pools run the jobs of the `drover` queue connection: QUEUE_CONNECTION must become drover, and config/queue.php needs 'drover' => ['driver' => 'drover', 'connection' => 'pgsql', 'queue' => 'default'] (its connection: your PostgreSQL connection). Jobs already on the old connections are not moved: let the supervisord workers drain them first.", '');
        foreach (['Not carried over from the supervisord files:' => $this->notCarriedOver(), 'Differences, and what the import rewrote:' => $this->remarks, 'Skipped (not queue workers, or not selected):' => $this->skipped] as $title => $lines) {
            if ($lines !== []) {
                $out .= "//\n// $title\n";
                foreach ($lines as $line) {
                    $out .= HorizonImporter::commentBlock($line, '', '  - ');
                }
            }
        }
        $values = [];
        foreach ($this->settings as $key => $value) {
            $values[$key] = $value . (isset($this->settingComments[$key]) ? ' /* ' . $this->settingComments[$key] . ' */' : '');
        }
        $out .= "\nreturn [";
        $out .= HorizonImporter::shippedSettings($shippedConfig, $values);
        $out .= "\n\n";
        $out .= HorizonImporter::commentBlock('The pools by name: one per supervisord program. Every key is optional; a missing key takes the default the package\'s config/drover.php documents.', '    ');
        $out .= "    'defaults' => [\n";
        foreach ($this->pools as $pool => $options) {
            $out .= '        ' . HorizonImporter::export($pool) . " => [\n";
            foreach ($options as $key => $value) {
                $comment = $this->comments[$pool][$key] ?? null;
                $out .= '            ' . HorizonImporter::export($key) . ' => ' . HorizonImporter::export($value) . ',' . ($comment === null ? '' : " // $comment") . "\n";
            }
            $out .= "        ],\n";
        }
        $out .= "    ],\n\n";
        $out .= HorizonImporter::commentBlock("supervisord ran these workers on every machine its files were on, whatever the environment: the '*' entry runs every pool of `defaults` in every environment. Name environments instead (e.g. 'production' => []) to run them only there; an environment no entry matches runs no workers.", '    ');
        $out .= "    'environments' => [\n        '*' => [],\n    ],\n];\n";
        return $out;
    }

    /**
     * One file as supervisord's configparser reads it, into $this->sections (a section seen again
     * is merged into the first, a later setting winning, as supervisord does with its includes),
     * then its [include] files. Problems name the file and line.
     */
    private function readFile(string $path, ?string $includedFrom): void
    {
        $real = realpath($path);
        if ($real !== false && isset($this->read[$real])) {
            return;
        }
        $from = $includedFrom === null ? '' : " (included by $includedFrom)";
        if (!file_exists($path)) {
            $this->problems[] = "$path$from: no such file; pass supervisord's program files, e.g. /etc/supervisor/conf.d/*.conf";
            return;
        }
        if (is_dir($path)) {
            $this->problems[] = "$path$from: a directory; pass the files in it, e.g. $path/*.conf";
            return;
        }
        $text = is_readable($path) ? @file_get_contents($path) : false;
        if ($text === false) {
            $this->problems[] = "$path$from: cannot be read (permission denied?); run the import as a user who can read it, or copy it somewhere readable";
            return;
        }
        $this->read[(string) $real] = true;
        $this->files[] = $path;
        $section = null;
        $lastKey = null;
        $found = [];
        foreach (preg_split('/\r\n|\n|\r/', $text) as $i => $raw) {
            $line = $i + 1;
            $stripped = trim($raw);
            if ($stripped === '') {
                $lastKey = null;
                continue;
            }
            if ($stripped[0] === ';' || $stripped[0] === '#') {
                continue;
            }
            // Inline comments: ; or # after whitespace (supervisord's inline_comment_prefixes).
            $value = (string) preg_replace('/\s[;#].*$/s', '', $raw);
            if ($section !== null && $lastKey !== null && preg_match('/^\s/', $raw)) {
                $this->sections[$section]['values'][$lastKey][0] .= "\n" . trim($value);
                continue;
            }
            $lastKey = null;
            if (preg_match('/^\[(.+)\]$/', trim($value), $m)) {
                $section = trim($m[1]);
                $found[] = $section;
                if (isset($this->sections[$section])) {
                    $first = $this->sections[$section];
                    if (str_starts_with($section, 'program:')) {
                        $this->remarks[] = "[$section] is in {$first['file']}:{$first['line']} and $path:$line: supervisord reads all its files into one configuration and merges them (a later setting wins), and so did the import";
                    }
                } else {
                    $this->sections[$section] = ['file' => $path, 'line' => $line, 'values' => []];
                }
                continue;
            }
            if ($section === null) {
                $this->problems[] = "$path:$line: `$stripped` comes before any section; a supervisord file is made of sections such as [program:NAME], each followed by its key=value settings";
                return;
            }
            $eq = strpos($value, '=');
            $colon = strpos($value, ':');
            $at = $eq === false ? $colon : ($colon === false ? $eq : min($eq, $colon));
            if ($at === false || trim(substr($value, 0, $at)) === '') {
                $this->problems[] = "$path:$line: `$stripped` is neither a section ([program:NAME]) nor a setting (key=value); fix or remove the line";
                continue;
            }
            $key = strtolower(trim(substr($value, 0, $at)));
            $this->sections[$section]['values'][$key] = [trim(substr($value, $at + 1)), $path, $line];
            $lastKey = $key;
        }
        if ($this->problems !== []) {
            return;
        }
        foreach ($found as $name) {
            if ($name === 'include' && isset($this->sections['include']['values']['files'])) {
                [$files, $file, $line] = $this->sections['include']['values']['files'];
                unset($this->sections['include']['values']['files']);
                $this->readIncludes($files, $file, $line);
            }
        }
        $programs = array_filter($found, fn ($s) => preg_match('/^(program|fcgi-program|eventlistener|group|include):/', $s . ':') === 1);
        if ($programs === [] && $this->problems === []) {
            $this->problems[] = "$path$from: no [program:NAME] section (nor an [include]); pass supervisord's program files, e.g. /etc/supervisor/conf.d/*.conf";
        }
    }

    /** [include] files = …: whitespace-separated globs, relative to the including file's directory. */
    private function readIncludes(string $patterns, string $file, int $line): void
    {
        $here = dirname((string) (realpath($file) ?: $file));
        $patterns = $this->expand($patterns, ['here' => $here], "$file:$line [include] files");
        if ($patterns === null) {
            return;
        }
        foreach (preg_split('/\s+/', trim($patterns)) ?: [] as $pattern) {
            if ($pattern === '') {
                continue;
            }
            $pattern = str_starts_with($pattern, '/') ? $pattern : "$here/$pattern";
            $matches = glob($pattern) ?: [];
            if ($matches === []) {
                $this->remarks[] = "$file:$line [include] files: $pattern matches no file (supervisord only warns, and so does the import)";
            }
            foreach ($matches as $match) {
                $this->readFile($match, "$file:$line");
            }
        }
    }

    /** [group:NAME] programs=a,b: the programs' %(group_name)s. */
    private function readGroups(): void
    {
        foreach ($this->sections as $section => $data) {
            if (str_starts_with($section, 'group:') && isset($data['values']['programs'])) {
                foreach (explode(',', $data['values']['programs'][0]) as $program) {
                    $this->groups[trim($program)] = substr($section, 6);
                }
            }
        }
    }

    /**
     * Every [program:NAME], its command expanded and parsed for each of its processes: the
     * queue workers (name => what conversion needs), the rest skipped with why.
     *
     * @return array<string, array<string, mixed>>
     */
    private function programs(): array
    {
        $workers = [];
        foreach ($this->sections as $section => $data) {
            if (preg_match('/^(fcgi-program|eventlistener):(.*)$/', $section, $m)) {
                $this->skipped[] = "[$section] ({$data['file']}:{$data['line']}): " . ($m[1] === 'eventlistener' ? 'a supervisord event listener' : 'a FastCGI program') . ', not a queue worker';
                continue;
            }
            if (!str_starts_with($section, 'program:')) {
                continue;
            }
            $name = substr($section, 8);
            $place = "{$data['file']}:{$data['line']}";
            $where = "$place [program:$name]";
            $values = $data['values'];
            $at = fn (string $key) => isset($values[$key]) ? "{$values[$key][1]}:{$values[$key][2]} [program:$name] $key" : "$where $key";
            if (!isset($values['command']) || trim($values['command'][0]) === '') {
                $this->problems[] = "$where has no command= (supervisord refuses such a program); add its command or remove the section";
                continue;
            }
            $vars = ['program_name' => $name, 'group_name' => $this->groups[$name] ?? $name, 'host_node_name' => $this->options['host'] ?? (string) gethostname(), 'here' => dirname((string) (realpath($values['command'][1]) ?: $values['command'][1]))];
            $numprocs = $this->integerSetting($values, 'numprocs', 1, $vars, $at('numprocs'));
            $start = $this->integerSetting($values, 'numprocs_start', 0, $vars, $at('numprocs_start'));
            if ($numprocs === null || $start === null) {
                continue;
            }
            if ($numprocs === 0) {
                $this->skipped[] = "[program:$name] ($place): numprocs=0, supervisord starts no process of it";
                continue;
            }
            $vars['numprocs'] = $numprocs;
            $processName = $values['process_name'][0] ?? '%(program_name)s';
            if ($numprocs > 1 && !str_contains($processName, '%(process_num)')) {
                $this->problems[] = $at('process_name') . ": with numprocs=$numprocs supervisord refuses a process_name without %(process_num) (it would give every process one name), so this file is not what supervisord runs; add process_name=%(program_name)s_%(process_num)02d";
                continue;
            }
            $parsed = null;
            for ($num = $start; $num < $start + $numprocs; $num++) {
                $one = $this->parseProcess($values, $vars + ['process_num' => $num], $at);
                if ($one === null) {
                    continue 2;
                }
                if ($parsed !== null && $one['same'] !== $parsed['same']) {
                    $this->problems[] = $at('command') . ": its processes run different workers (process $start: " . $parsed['line'] . "; process $num: " . $one['line'] . '); a drover pool runs all its workers alike: write one program per variant';
                    continue 2;
                }
                $parsed ??= $one;
            }
            if ($parsed['skip'] !== null) {
                $this->skipped[] = "[program:$name] ($place): " . $parsed['skip'];
                continue;
            }
            $parsed['numprocs'] = $numprocs;
            $parsed['where'] = $where;
            $parsed['place'] = $place;
            $parsed['values'] = $values;
            $workers[$name] = $parsed;
        }
        return $workers;
    }

    /** A whole-number program setting (numprocs, numprocs_start), expanded; null after a problem. */
    private function integerSetting(array $values, string $key, int $default, array $vars, string $at): ?int
    {
        if (!isset($values[$key])) {
            return $default;
        }
        $value = $this->expand($values[$key][0], $vars, $at);
        if ($value === null) {
            return null;
        }
        if (!ctype_digit(trim($value))) {
            $this->problems[] = "$at=$value: supervisord wants a whole number of 0 or more; fix it";
            return null;
        }
        return (int) trim($value);
    }

    /**
     * One process's command: expanded, split and classified. 'same' is what must not differ
     * between the processes of one program; 'skip' says why it is not a queue worker.
     *
     * @return array<string, mixed>|null null after a problem
     */
    private function parseProcess(array $values, array $vars, \Closure $at): ?array
    {
        $command = $this->expand($values['command'][0], $vars, $at('command'));
        $directory = isset($values['directory']) ? $this->expand($values['directory'][0], $vars, $at('directory')) : null;
        if ($command === null || (isset($values['directory']) && $directory === null)) {
            return null;
        }
        $tokens = self::split($command, $error);
        if ($tokens === null) {
            $this->problems[] = $at('command') . "=$command: $error, so supervisord cannot split it into arguments either; fix the quoting";
            return null;
        }
        $result = $this->classify($tokens, $directory, $at('command'), $command);
        if ($result === null) {
            return null;
        }
        $result['line'] = $command;
        // What the pool is made of; --name may well differ per process (worker_%(process_num)02d).
        $flags = $result['flags'] ?? [];
        unset($flags['name']);
        $result['same'] = [$result['skip'], $result['connection'] ?? null, $flags, $result['nice'] ?? null, $result['artisan'] ?? null, $result['directory']];
        return $result;
    }

    /**
     * supervisord's expansions: %(name)s / %(name)d / %(name)02d … of the program's names and
     * process number, %(here)s, %(ENV_X)s, and %% for a percent sign.
     */
    private function expand(string $value, array $vars, string $at): ?string
    {
        $problem = null;
        $out = preg_replace_callback('/%(?:\((\w+)\)([-0 +]*\d*(?:\.\d+)?)([sdirxXf])|(%)|(.?))/s', function (array $m) use ($vars, $at, &$problem) {
            if (($m[4] ?? '') === '%') {
                return '%';
            }
            if (($m[1] ?? '') === '') {
                $problem ??= "$at: a % that supervisord cannot expand; write %% for a percent sign (expansions look like %(program_name)s, %(process_num)02d, %(ENV_NAME)s)";
                return '';
            }
            $name = $m[1];
            if (str_starts_with($name, 'ENV_')) {
                $env = $this->options['env'] ?? getenv();
                $value = $env[substr($name, 4)] ?? null;
                if ($value === null || $value === false) {
                    $problem ??= "$at: %($name)s names the environment variable " . substr($name, 4) . ', which is not set here; run the import with it set as supervisord has it (' . substr($name, 4) . '=… php artisan drover:import-supervisor …)';
                    return '';
                }
            } elseif (array_key_exists($name, $vars)) {
                $value = $vars[$name];
            } else {
                $problem ??= "$at: supervisord cannot expand %($name)s (it knows program_name, process_num, group_name, host_node_name, numprocs, here and ENV_NAME); fix the name";
                return '';
            }
            $conversion = match ($m[3]) {
                'i' => 'd',
                'r' => 's',
                default => $m[3],
            };
            return sprintf('%' . $m[2] . $conversion, $value);
        }, $value);
        if ($problem !== null) {
            $this->problems[] = $problem;
            return null;
        }
        return (string) $out;
    }

    /**
     * A command line split as supervisord splits it (Python's shlex.split: POSIX quoting and
     * backslashes, no comments); null and $error when the quoting is broken.
     *
     * @return list<string>|null
     */
    public static function split(string $command, ?string &$error = null): ?array
    {
        $tokens = [];
        $current = '';
        $inToken = false;
        $quote = null;
        $length = strlen($command);
        for ($i = 0; $i < $length; $i++) {
            $c = $command[$i];
            if ($quote === "'") {
                if ($c === "'") {
                    $quote = null;
                } else {
                    $current .= $c;
                }
            } elseif ($quote === '"') {
                if ($c === '\\' && $i + 1 < $length && in_array($command[$i + 1], ['\\', '"'], true)) {
                    $current .= $command[++$i];
                } elseif ($c === '"') {
                    $quote = null;
                } else {
                    $current .= $c;
                }
            } elseif (ctype_space($c)) {
                if ($inToken) {
                    $tokens[] = $current;
                    $current = '';
                    $inToken = false;
                }
            } elseif ($c === '\\') {
                if ($i + 1 >= $length) {
                    $error = 'it ends with a backslash that escapes nothing';
                    return null;
                }
                $current .= $command[++$i];
                $inToken = true;
            } elseif ($c === "'" || $c === '"') {
                $quote = $c;
                $inToken = true;
            } else {
                $current .= $c;
                $inToken = true;
            }
        }
        if ($quote !== null) {
            $error = "its $quote quote is never closed";
            return null;
        }
        if ($inToken) {
            $tokens[] = $current;
        }
        return $tokens;
    }

    /**
     * What a command runs: through `nice`, `env` or `sh -c` (said), a PHP binary with its ini
     * options, artisan, and a command; queue:work and queue:listen parsed with their own options.
     * A command that mentions queue:work in a form the import does not understand is a problem,
     * never a skip: a worker must not be dropped silently.
     *
     * @param list<string> $tokens
     * @return array<string, mixed>|null
     */
    private function classify(array $tokens, ?string $directory, string $at, string $line): ?array
    {
        $result = ['skip' => null, 'nice' => null, 'env' => [], 'before' => [], 'php' => null, 'ini' => [], 'directory' => $directory];
        $mentionsWorker = (bool) preg_grep('/(^|\s)queue:(work|listen)(\s|$)/', $tokens);
        $unknown = function (string $what) use ($mentionsWorker, $at, $line, &$result): ?array {
            if ($mentionsWorker) {
                $this->problems[] = "$at=$line: runs queue:work through $what, which the import does not understand; write the command as `php /path/to/artisan queue:work …`, or write its pool into config/drover.php by hand";
                return null;
            }
            $result['skip'] = "not a queue worker (runs `$line`)";
            return $result;
        };
        $i = 0;
        $n = count($tokens);
        while ($i < $n) {
            $word = basename($tokens[$i]);
            if ($word === 'nice') {
                $i++;
                $nice = 10;
                if ($i < $n && preg_match('/^(?:-n|--adjustment)(?:=?(-?\d+))?$|^-(\d+)$/', $tokens[$i], $m)) {
                    if (($m[1] ?? '') !== '' || ($m[2] ?? '') !== '') {
                        $nice = (int) (($m[1] ?? '') !== '' ? $m[1] : $m[2]);
                        $i++;
                    } elseif ($i + 1 < $n && preg_match('/^-?\d+$/', $tokens[$i + 1])) {
                        $nice = (int) $tokens[$i + 1];
                        $i += 2;
                    } else {
                        return $unknown('`nice ' . $tokens[$i] . '`');
                    }
                }
                $result['nice'] = $nice;
            } elseif ($word === 'env') {
                $i++;
                while ($i < $n && preg_match('/^[A-Za-z_][A-Za-z0-9_]*=/', $tokens[$i])) {
                    $result['env'][] = strstr($tokens[$i], '=', true);
                    $i++;
                }
                if ($i < $n && str_starts_with($tokens[$i], '-')) {
                    return $unknown('`env ' . $tokens[$i] . '`');
                }
            } elseif (in_array($word, ['sh', 'bash', 'dash', 'zsh'], true) && $i + 2 < $n && in_array($tokens[$i + 1], ['-c', '-lc'], true)) {
                $script = self::split($tokens[$i + 2], $error);
                if ($script === null || $i + 3 < $n) {
                    return $unknown("a `$word -c` script " . ($script === null ? "whose quoting is broken ($error)" : 'with arguments after it'));
                }
                // cd DIR && … && php artisan queue:work …: the directory is kept, other steps said.
                $segments = [[]];
                foreach ($script as $token) {
                    if (in_array($token, ['&&', ';'], true)) {
                        $segments[] = [];
                    } else {
                        $segments[count($segments) - 1][] = $token;
                    }
                }
                $last = array_pop($segments);
                foreach ($segments as $segment) {
                    if (($segment[0] ?? null) === 'cd' && count($segment) === 2) {
                        $result['directory'] = str_starts_with($segment[1], '/') || $result['directory'] === null ? $segment[1] : $result['directory'] . '/' . $segment[1];
                    } elseif ($segment !== []) {
                        $result['before'][] = implode(' ', $segment);
                    }
                }
                if (($last[0] ?? null) === 'exec') {
                    array_shift($last);
                }
                if (preg_grep('/^(\||&|\|\||>|>>|<|2>&1)$/', $last)) {
                    return $unknown("a `$word -c` script with pipes or redirections");
                }
                $tokens = $last;
                $n = count($tokens);
                $i = 0;
            } else {
                break;
            }
        }
        if ($i >= $n) {
            return $unknown('a wrapper with no command after it');
        }
        if (!preg_match('/^php(\d+(\.\d+)*)?(-cli)?$/', basename($tokens[$i]))) {
            return $unknown('`' . basename($tokens[$i]) . '`');
        }
        $result['php'] = $tokens[$i++];
        while ($i < $n && str_starts_with($tokens[$i], '-')) {
            $option = $tokens[$i++];
            if (in_array($option, ['-d', '-c'], true) && $i < $n) {
                $result['ini'][] = "$option " . $tokens[$i++];
            } elseif (preg_match('/^-[dc]./', $option) || in_array($option, ['-n', '-e', '-H', '-q'], true)) {
                $result['ini'][] = $option;
            } elseif ($option === '-f' && $i < $n) {
                break;
            } else {
                return $unknown("PHP's option $option");
            }
        }
        if ($i >= $n || basename($tokens[$i]) !== 'artisan') {
            return $unknown($i >= $n ? 'PHP with no script' : 'the PHP script ' . $tokens[$i] . ' (not artisan)');
        }
        $result['artisan'] = $tokens[$i++];
        $args = array_slice($tokens, $i);
        $commandAt = null;
        foreach ($args as $k => $arg) {
            if (!str_starts_with($arg, '-')) {
                // An --env value may follow as its own word: `--env production queue:work`.
                if ($k > 0 && in_array($args[$k - 1], ['--env'], true)) {
                    continue;
                }
                $commandAt = $k;
                break;
            }
        }
        if ($commandAt === null) {
            $result['skip'] = "not a queue worker (runs artisan with no command: `$line`)";
            return $result;
        }
        $name = $args[$commandAt];
        if (in_array($name, ['horizon', 'horizon:work', 'horizon:supervisor'], true)) {
            $result['skip'] = "runs Laravel Horizon (`artisan $name`): import config/horizon.php with `php artisan drover:import-horizon` (docs/migrating-from-horizon.md)";
            return $result;
        }
        if ($name === 'drover') {
            $result['skip'] = 'already runs drover (`artisan drover`): run it under systemd instead of supervisord (docs/deploy.md)';
            return $result;
        }
        if ($name === 'schedule:work' || $name === 'schedule:run') {
            $result['skip'] = "runs the schedule (`artisan $name`): `php artisan drover` runs it now, with onOneServer() once across hosts and a history (docs/schedule.md); remove this program, or both would run each task";
            return $result;
        }
        if ($name !== 'queue:work' && $name !== 'queue:listen') {
            $result['skip'] = "not a queue worker (runs `artisan $name`)";
            return $result;
        }
        $result['command'] = $name;
        array_splice($args, $commandAt, 1);
        $known = ($name === 'queue:work' ? self::WORK_OPTIONS : self::LISTEN_OPTIONS) + self::GLOBAL_OPTIONS;
        $flags = [];
        $arguments = [];
        $onlyArguments = false;
        for ($k = 0; $k < count($args); $k++) {
            $arg = $args[$k];
            if ($onlyArguments || !str_starts_with($arg, '-') || $arg === '-') {
                $arguments[] = $arg;
                continue;
            }
            if ($arg === '--') {
                $onlyArguments = true;
                continue;
            }
            if (!str_starts_with($arg, '--')) {
                $short = substr($arg, 1);
                // -q, -vv, and flags run together as Symfony reads them (-qn).
                $letters = isset(self::SHORT_OPTIONS[$short]) ? [$short] : str_split($short);
                foreach ($letters as $letter) {
                    if (!isset(self::SHORT_OPTIONS[$letter])) {
                        $this->problems[] = "$at=$line: $name has no option $arg (Laravel refuses the command as written, so supervisord cannot have run this worker); remove it";
                        return null;
                    }
                    $flags[self::SHORT_OPTIONS[$letter]] = [true, $arg];
                }
                continue;
            }
            $option = substr($arg, 2);
            $value = null;
            if (str_contains($option, '=')) {
                [$option, $value] = explode('=', $option, 2);
            }
            if (!array_key_exists($option, $known)) {
                $this->problems[] = "$at=$line: $name has no option --$option (Laravel refuses the command as written, so supervisord cannot have run this worker); remove it";
                return null;
            }
            if (!$known[$option]) {
                if ($value !== null) {
                    $this->problems[] = "$at=$line: $name's --$option takes no value (Laravel refuses `$arg`); write --$option alone";
                    return null;
                }
                $flags[$option] = [true, $arg];
                continue;
            }
            if ($value === null && isset($args[$k + 1]) && !str_starts_with($args[$k + 1], '-')) {
                $value = $args[++$k];
                $arg .= " $value";
            }
            $flags[$option] = [$value, $arg];
        }
        if (isset($flags['help']) || isset($flags['version'])) {
            $result['skip'] = "not a queue worker: `$line` prints " . (isset($flags['help']) ? 'its help' : "Laravel's version") . ' and exits';
            return $result;
        }
        if (count($arguments) > 1) {
            $this->problems[] = "$at=$line: $name takes one argument, the connection, and this has " . count($arguments) . ' (' . implode(', ', $arguments) . '); Laravel refuses it as written: remove the extra words';
            return null;
        }
        $result['connection'] = $arguments[0] ?? null;
        ksort($flags);
        $result['flags'] = $flags;
        return $result;
    }

    /**
     * With several applications' workers in the files (one server, several sites): those of
     * --directory, else of this application, else a problem naming them all.
     *
     * @param array<string, array<string, mixed>> $workers
     * @return array<string, array<string, mixed>>
     */
    private function oneApplication(array $workers): array
    {
        $apps = [];
        foreach ($workers as $name => $worker) {
            $artisan = (string) $worker['artisan'];
            $directory = $worker['directory'];
            if (!str_starts_with($artisan, '/')) {
                $artisan = $directory === null ? null : rtrim($directory, '/') . '/' . $artisan;
            }
            $app = $artisan === null ? null : self::normalize(dirname($artisan));
            $workers[$name]['app'] = $app;
            if ($app !== null) {
                $apps[$app][] = $name;
            }
        }
        $chosen = isset($this->options['directory']) && $this->options['directory'] !== null && $this->options['directory'] !== '' ? self::normalize($this->options['directory']) : null;
        if ($chosen === null && count($apps) > 1) {
            $base = isset($this->options['base_path']) ? self::normalize((string) $this->options['base_path']) : null;
            if ($base === null || !isset($apps[$base])) {
                $list = [];
                foreach ($apps as $app => $names) {
                    $list[] = "$app: " . implode(', ', $names);
                }
                $this->problems[] = 'the files run the queue workers of several applications (' . implode('; ', $list) . '): pass --directory=DIR, the directory of the one to import (its artisan\'s)';
                return [];
            }
            $chosen = $base;
        }
        if ($chosen !== null) {
            if (!isset($apps[$chosen])) {
                $this->problems[] = "--directory=$chosen: no queue worker of the files runs $chosen/artisan (they run: " . (implode(', ', array_keys($apps)) ?: 'artisan by a relative path, with no directory=') . ')';
                return [];
            }
            foreach ($workers as $name => $worker) {
                if ($worker['app'] !== null && $worker['app'] !== $chosen) {
                    $this->skipped[] = "[program:$name] ({$worker['place']}): the queue worker of another application ({$worker['app']}/artisan)";
                    unset($workers[$name]);
                }
            }
        }
        $app = $chosen ?? (array_key_first($apps) ?? null);
        $base = isset($this->options['base_path']) ? self::normalize((string) $this->options['base_path']) : null;
        if ($app !== null && $base !== null && $app !== $base) {
            $this->remarks[] = "the workers ran $app/artisan; drover's workers run the artisan of the application the master is started from: on that server, start it there (`php $app/artisan drover`, or the systemd unit's path, docs/deploy.md)";
        }
        return $workers;
    }

    private static function normalize(string $path): string
    {
        $path = (string) preg_replace('#/+#', '/', $path);
        $path = (string) preg_replace('#(/\.)+(/|$)#', '/', $path);
        return $path === '/' ? $path : rtrim($path, '/');
    }

    /**
     * The workers as pools: connection, queues, processes, then each flag as its pool key, with
     * comments saying where a value came from; what has no key goes to notCarried.
     *
     * @param array<string, array<string, mixed>> $workers
     */
    private function convert(array $workers): void
    {
        $drover = $this->droverConnection();
        $only = array_values(array_filter(array_map('trim', $this->options['connections'] ?? []), fn ($c) => $c !== ''));
        $taken = [];
        $users = [];
        $stopwait = null;
        $sleepers = [];
        $listeners = [];
        foreach ($workers as $program => $worker) {
            $where = "[program:$program]";
            $connection = $worker['connection'];
            if ($connection === null) {
                $connection = $this->defaultConnection ?? 'default';
                $this->remarks[] = "$where names no connection: {$worker['command']} worked the default one, config('queue.default'), which is '$connection' here (QUEUE_CONNECTION on the server may have differed)";
            }
            if ($only !== [] && !in_array($connection, $only, true)) {
                $this->skipped[] = "$where ({$worker['place']}): works connection $connection, and --connection selects " . implode(', ', $only);
                continue;
            }
            $pool = trim((string) preg_replace('/[^A-Za-z0-9_.-]+/', '-', $program), '-');
            $pool = $pool === '' ? 'pool' : $pool;
            if (isset($taken[$pool])) {
                $this->problems[] = "programs {$taken[$pool]} and $program would both become drover pool '$pool' (a pool name may use letters, digits, '_', '.' and '-' only): rename one";
                continue;
            }
            $taken[$pool] = $program;
            if ($pool !== $program) {
                $this->remarks[] = "program '$program' is pool '$pool': a drover pool name may use letters, digits, '_', '.' and '-' only";
            }
            $flags = $worker['flags'];
            $options = [];
            $comments = [];
            $driver = $this->queueConnections[$connection]['driver'] ?? null;
            if ($driver === 'drover') {
                $options['connection'] = $connection;
            } else {
                $options['connection'] = $drover;
                $comments['connection'] = "supervisord: {$worker['command']} $connection";
                $this->connections[$connection][] = $program;
                if (!isset($this->queueConnections[$connection])) {
                    $this->remarks[] = "$where works connection '$connection', which config/queue.php does not define here";
                }
            }
            $queue = $flags['queue'][0] ?? null;
            $queues = is_string($queue) ? array_values(array_filter(array_map('trim', explode(',', $queue)), fn ($q) => $q !== '')) : [];
            if ($queues === []) {
                $own = self::defaultQueue($this->queueConnections[$connection] ?? null);
                $theirs = self::defaultQueue($this->queueConnections[$options['connection']] ?? null);
                $queues = [$theirs];
                $comments['queue'] = $driver === 'drover' ? "no --queue: the connection's default queue" : "no --queue: the $drover connection's default queue";
                if ($own !== $theirs) {
                    $this->remarks[] = "$where has no --queue: it worked connection $connection's default queue '$own'; jobs dispatched without a queue go to the $drover connection's default '$theirs' once QUEUE_CONNECTION=$drover, so the pool serves '$theirs' (add '$own' to its queue if jobs name it)";
                }
            }
            $options['queue'] = $queues;
            $options['processes'] = $worker['numprocs'];
            $comments['processes'] = 'numprocs';
            foreach (self::FLAG_KEYS as $flag => $key) {
                if (!isset($flags[$flag])) {
                    continue;
                }
                [$value, $written] = $flags[$flag];
                if ($value === null || $value === '') {
                    continue;
                }
                if (!is_numeric($value) || $value < 0 || (in_array($flag, ['tries', 'timeout', 'memory', 'max-jobs', 'max-time'], true) && !ctype_digit($value))) {
                    $this->problems[] = "{$worker['where']} command: $written: " . (in_array($flag, ['sleep', 'rest'], true) ? 'a number of seconds' : 'a whole number') . ' of 0 or more, as queue:work reads it; fix the value';
                    continue;
                }
                $options[$key] = str_contains($value, '.') ? (float) $value : (int) $value;
            }
            $backoff = $this->backoff($flags, $worker, $where);
            if ($backoff !== null) {
                $options['backoff'] = $backoff;
            }
            if (isset($flags['once'])) {
                $options['max_jobs'] = 1;
                $comments['max_jobs'] = '--once: one job per worker';
                if (isset($flags['max-jobs'])) {
                    $this->remarks[] = "$where has --once and --max-jobs: queue:work --once runs one job and exits, so max_jobs is 1";
                }
            }
            if (isset($flags['force'])) {
                $options['force'] = true;
            }
            if ($worker['nice'] !== null) {
                $options['nice'] = $worker['nice'];
                $comments['nice'] = "nice {$worker['nice']}";
            }
            if (isset($flags['sleep'][0]) && $flags['sleep'][0] !== '') {
                $sleepers[] = $program;
            }
            if ($worker['command'] === 'queue:listen') {
                $listeners[] = $program;
            }
            $this->notCarriedFlags($flags, $worker, $program);
            $this->notCarriedSettings($worker, $program);
            if (isset($worker['values']['user'])) {
                $users[trim($worker['values']['user'][0])][] = $program;
            } else {
                $users[''][] = $program;
            }
            $wait = $worker['values']['stopwaitsecs'][0] ?? null;
            if ($wait !== null) {
                if (!ctype_digit(trim($wait))) {
                    $this->problems[] = "{$worker['where']} stopwaitsecs=$wait: supervisord wants a whole number of seconds; fix it";
                } else {
                    $stopwait = max($stopwait ?? self::STOPWAITSECS, (int) trim($wait));
                }
            } elseif ($stopwait !== null) {
                $stopwait = max($stopwait, self::STOPWAITSECS);
            }
            $ordered = [];
            foreach (self::KEY_ORDER as $key) {
                if (array_key_exists($key, $options)) {
                    $ordered[$key] = $options[$key];
                }
            }
            $this->pools[$pool] = $ordered;
            $this->comments[$pool] = $comments;
            $this->placeOf[$pool] = $worker['where'];
        }
        if ($sleepers !== []) {
            $this->remarks[] = '--sleep (' . implode(', ', $sleepers) . "): queue:work's wait between polls of an empty queue, carried over as the pool's sleep; drover's workers never poll (the master pushes each job the moment PostgreSQL NOTIFYs it), so `sleep` is only their nap while the application is in maintenance mode, as queue:work's is then";
        }
        if ($listeners !== []) {
            $this->remarks[] = 'queue:listen (' . implode(', ', $listeners) . "): it boots the application anew for every job (a `queue:work --once` per job), so changed code runs without a restart; drover's workers keep it booted, as queue:work does: run `php artisan drover:restart` after changing code";
        }
        $this->importUser($users);
        if ($stopwait !== null) {
            $this->settings['shutdown_grace'] = (string) $stopwait;
            $this->settingComments['shutdown_grace'] = 'supervisord stopwaitsecs, the longest of the programs';
            $this->remarks[] = "stopwaitsecs: written as drover.shutdown_grace = $stopwait, how long a stopping master lets running jobs finish (one value for every pool: the longest); under systemd keep the unit's TimeoutStopSec above shutdown_grace + 10 s (drover@.service has 45 s)";
        }
        $this->remarkOnConnections($drover);
    }

    /** --backoff (and queue:work's deprecated --delay, of which Laravel takes the larger) as the pool's backoff; null when neither is given. */
    private function backoff(array $flags, array $worker, string $where): int|array|null
    {
        $backoff = $flags['backoff'][0] ?? null;
        $delay = $flags['delay'][0] ?? null;
        $parse = function (?string $value, string $written) use ($worker): int|array|null {
            if ($value === null || $value === '') {
                return null;
            }
            $parts = array_map('trim', explode(',', $value));
            foreach ($parts as $part) {
                if (!ctype_digit($part)) {
                    $this->problems[] = "{$worker['where']} command: $written: whole seconds, or a list of them separated by commas (--backoff=1,5,10), as queue:work reads it; fix the value";
                    return null;
                }
            }
            $parts = array_map('intval', $parts);
            return count($parts) === 1 ? $parts[0] : $parts;
        };
        $value = $parse($backoff, $flags['backoff'][1] ?? '');
        if ($delay !== null && $delay !== '') {
            if ($worker['command'] === 'queue:listen') {
                $this->note('--delay', "queue:listen passes --backoff, which it always has, and ignores --delay", $where);
                return $value;
            }
            $delayed = $parse($delay, $flags['delay'][1]);
            if (is_int($delayed) && (is_int($value) || $value === null)) {
                $this->remarks[] = "$where --delay: deprecated; queue:work retries after the larger of --backoff and --delay, written as backoff";
                return max($value ?? 0, $delayed);
            }
            $this->note('--delay', 'deprecated; with a --backoff list Laravel uses the list', $where);
        }
        return $value;
    }

    private function notCarriedFlags(array $flags, array $worker, string $program): void
    {
        $where = "[program:$program]";
        foreach ($flags as $flag => [$value, $written]) {
            if (isset(self::FLAGS_NOT_CARRIED[$flag])) {
                $this->note("--$flag", self::FLAGS_NOT_CARRIED[$flag], $where);
            } elseif ($flag === 'env') {
                $this->note("--env=$value", "the worker ran in environment '$value'; drover's workers run in the master's: set APP_ENV=$value where `php artisan drover` runs (the application's .env, or the systemd unit's Environment=)", $where);
            }
        }
        $php = basename((string) $worker['php']);
        if ($php !== 'php') {
            $this->note($worker['php'], "drover's workers run the PHP that runs `php artisan drover` (PHP_BINARY): start the master with $php", $where);
        }
        foreach ($worker['ini'] as $ini) {
            $this->note("php $ini", "drover starts its workers with the PHP of the master and its php.ini, not the master's command-line options: put the setting in the CLI's php.ini (e.g. /etc/php/*/cli/conf.d/)", $where);
        }
        foreach ($worker['env'] as $name) {
            $this->note("env $name=…", self::SETTINGS_NOT_CARRIED['environment'], $where);
        }
        foreach ($worker['before'] as $step) {
            $this->note("`$step` before the worker", 'drover runs each worker directly (in the application\'s directory), with no shell script around it', $where);
        }
    }

    private function notCarriedSettings(array $worker, string $program): void
    {
        $where = "[program:$program]";
        $directory = $worker['directory'];
        if ($directory !== null && $worker['app'] !== null && self::normalize($directory) !== $worker['app']) {
            $this->note("directory=$directory", "drover starts every worker in the application's directory (drover.app_path, the path `php artisan drover` was started from), here {$worker['app']}", $where);
        }
        foreach ($worker['values'] as $key => [$value]) {
            $value = trim($value);
            $bool = strtolower($value);
            if (in_array($key, self::SETTINGS_SILENT, true)) {
                continue;
            }
            if (preg_match(self::LOG_SETTINGS, $key)) {
                $this->note('stdout_logfile, stderr_logfile, redirect_stderr …', self::SETTINGS_NOT_CARRIED['logs'], $where);
            } elseif ($key === 'environment') {
                $names = [];
                preg_match_all('/(?:^|,)\s*([A-Za-z_][A-Za-z0-9_]*)\s*=/', $value, $m);
                foreach ($m[1] as $name) {
                    $names[] = $name;
                }
                $this->note('environment=' . implode(',', $names), self::SETTINGS_NOT_CARRIED['environment'], $where);
            } elseif ($key === 'autostart' || $key === 'stopasgroup') {
                if (in_array($bool, ['false', 'no', 'off', '0'], true) === ($key === 'autostart')) {
                    $this->note("$key=$value", self::SETTINGS_NOT_CARRIED[$key], $where);
                }
            } elseif ($key === 'autorestart') {
                if ($bool !== 'true' && $bool !== 'yes' && $bool !== 'on' && $bool !== '1') {
                    $this->note("autorestart=$value", self::SETTINGS_NOT_CARRIED['autorestart'], $where);
                }
            } elseif ($key === 'stopsignal') {
                if (!in_array(strtoupper(preg_replace('/^SIG/i', '', $value)), ['TERM', 'INT', 'QUIT'], true)) {
                    $this->note("stopsignal=$value", self::SETTINGS_NOT_CARRIED['stopsignal'], $where);
                }
            } elseif ($key === 'startsecs' || $key === 'startretries') {
                $this->note('startsecs, startretries', self::SETTINGS_NOT_CARRIED['startsecs'], $where);
            } elseif (isset(self::SETTINGS_NOT_CARRIED[$key])) {
                $this->note($key, self::SETTINGS_NOT_CARRIED[$key], $where);
            } else {
                $this->note($key, 'not a setting of supervisord\'s [program:x] sections that the import knows', $where);
            }
        }
    }

    /** One user for every worker: drover.user (applied when the master runs as root, as supervisord's user= was). */
    private function importUser(array $users): void
    {
        if (count($users) === 1 && array_key_first($users) !== '') {
            $user = (string) array_key_first($users);
            $this->settings['user'] = "env('DROVER_USER', " . HorizonImporter::export($user) . ')';
            $this->settingComments['user'] = 'supervisord user=';
            $this->remarks[] = "user=$user: written as drover.user (DROVER_USER overrides it); a master started as root runs its workers as $user, as supervisord did, and the control socket is group-owned by $user's group";
            return;
        }
        if (count($users) > 1) {
            $list = [];
            foreach ($users as $user => $programs) {
                $list[] = ($user === '' ? "supervisord's own user" : $user) . ': ' . implode(', ', $programs);
            }
            $this->remarks[] = 'the programs run as different users (' . implode('; ', $list) . '): one drover master runs all its workers as one user, drover.user, so the import wrote none; set it (or DROVER_USER) to the one they should share';
        }
    }

    /** The application's drover connection: `drover` if it is one, else the first of driver drover, else `drover` (to be added). */
    private function droverConnection(): string
    {
        if (($this->queueConnections['drover']['driver'] ?? null) === 'drover') {
            return 'drover';
        }
        foreach ($this->queueConnections as $name => $connection) {
            if (is_array($connection) && ($connection['driver'] ?? null) === 'drover') {
                return (string) $name;
            }
        }
        return 'drover';
    }

    private static function defaultQueue(mixed $connection): string
    {
        $queue = is_array($connection) ? ($connection['queue'] ?? null) : null;
        return is_string($queue) && $queue !== '' ? $queue : 'default';
    }

    private function remarkOnConnections(string $drover): void
    {
        foreach ($this->connections as $connection => $programs) {
            $this->remarks[] = "connection '$connection' (" . implode(', ', $programs) . "): written as 'connection' => '$drover', since drover pools run the jobs of a drover queue connection; jobs already on '$connection' are not moved (let the supervisord workers drain them; --connection imports only the connections you name)";
        }
        if (count($this->connections) > 1) {
            $this->remarks[] = 'programs of different connections (' . implode(', ', array_keys($this->connections)) . ") now share the $drover connection: a queue name they both used is one queue now";
        }
    }

    private function note(string $what, string $why, string $where): void
    {
        $this->notCarried[$what] ??= [$why, []];
        $this->notCarried[$what][1][] = $where;
    }

    /** The pools checked as drover will check them (Pools::entry); a failure names the program and the values. */
    private function validate(): void
    {
        if ($this->problems !== []) {
            return;
        }
        foreach ($this->pools as $pool => $options) {
            try {
                Pools::entry(['defaults' => [$pool => $options], 'environments' => ['*' => []]], '*');
            } catch (InvalidConfig $e) {
                $this->problems[] = "{$this->placeOf[$pool]}: drover refuses the pool '$pool' it becomes (" . implode('; ', $e->problems) . '); fix its command line';
            }
        }
    }
}
