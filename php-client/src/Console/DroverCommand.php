<?php

namespace Drover\Console;

use Drover\Config\Pools;
use Illuminate\Console\Command;

/**
 * `php artisan drover`: exports config/drover.php as drover's versioned JSON contract and replaces
 * this process with the drover master (`drover run --config FILE`), so systemd or a terminal
 * supervises the master directly.
 */
class DroverCommand extends Command
{
    protected $signature = 'drover
        {--dry-run : Print the exported configuration and the command instead of starting the master}
        {--export : Print only the exported configuration (what the master runs on a reload)}
        {--stop-when-empty : Stop once every queue has no ready job and no worker holds one, then exit 0}
        {--max-jobs=0 : Stop after this many jobs have run, in all pools (0: no limit)}
        {--max-time=0 : Stop after serving this many seconds (0: no limit)}';

    protected $description = 'Start the drover master: it runs the worker pools of config/drover.php';

    /**
     * The exit code of a start refused for what only an operator can change (config/drover.php,
     * the binary, root without a user): EX_CONFIG, as the binary's own (src/rules/exit_code.rs).
     * The units do not restart on it (RestartPreventExitStatus=78): starting again unchanged
     * would be refused the same way.
     */
    public const NEEDS_OPERATOR = 78;

    public function handle(): int
    {
        $config = $this->laravel['config']['drover'] ?? [];
        try {
            $args = self::stopFlags($this->option('stop-when-empty'), $this->option('max-jobs'), $this->option('max-time'));
            $launch = MasterLaunch::prepare($this->laravel, $config);
        } catch (\InvalidArgumentException $e) {
            $this->error($e->getMessage());
            return self::NEEDS_OPERATOR;
        }
        if ($launch->contract['pools'] === []) {
            // As Horizon: an environment without pools runs none, and the master still starts (a
            // reload picks pools up once they exist). Said on stderr: a reload parses stdout.
            fwrite(STDERR, $this->noPools($config) . "\n");
        }

        if ($this->option('export')) {
            $this->getOutput()->write($launch->json());
            return 0;
        }
        $asRoot = RootStart::decide(RootStart::euid(), $launch->contract['user'], $this->laravel->environment());
        if ($asRoot === RootStart::BECOME_USER && ($found = \Drover\Binary::find($config['binary'] ?? null)) !== null && !RootStart::binaryLaunches($found)) {
            fwrite(STDERR, RootStart::olderBinary($found, (string) $launch->contract['user']) . "\n");
            $asRoot = RootStart::GO_ON;
        }
        if ($asRoot === RootStart::REFUSE) {
            $this->error(RootStart::refusal());
            return self::NEEDS_OPERATOR;
        }
        if ($asRoot === RootStart::BECOME_USER) {
            // Nothing written here as root: the master's state is the user's, written by the
            // artisan that `drover launch` starts as that user.
            $launchArgs = RootStart::launchArguments($launch->contract['user'], (string) $launch->contract['cwd'], PHP_BINARY, $args);
            try {
                $binary = $launch->binary();
            } catch (\RuntimeException $e) {
                $this->error($e->getMessage());
                return self::NEEDS_OPERATOR;
            }
            if ($this->option('dry-run')) {
                $this->line($launch->json());
                $this->line($binary . ' ' . implode(' ', $launchArgs));
                return 0;
            }
            fwrite(STDERR, RootStart::handover($launch->contract['user']) . "\n");
            $this->error($launch->exec($launchArgs));
            return 1;
        }
        if (RootStart::euid() === 0 && $asRoot === RootStart::GO_ON && ($launch->contract['user'] ?? null) === null) {
            fwrite(STDERR, RootStart::warning() . "\n");
        }
        try {
            $file = $launch->write();
            $binary = $launch->binary();
        } catch (\RuntimeException $e) {
            $this->error($e->getMessage());
            return self::NEEDS_OPERATOR;
        }
        $args = array_merge(['run', '--config', $file], $args);
        if ($this->option('dry-run')) {
            $this->line($launch->json());
            $this->line($binary . ' ' . implode(' ', $args));
            return 0;
        }
        $this->error($launch->exec($args));
        return 1;
    }

    /**
     * The master's flags for stopping by itself (`drover run --stop-when-empty --max-jobs N
     * --max-time S`), as `queue:work` takes them; 0 is no limit.
     *
     * @return list<string>
     */
    public static function stopFlags(mixed $whenEmpty, mixed $maxJobs, mixed $maxTime): array
    {
        $flags = $whenEmpty ? ['--stop-when-empty'] : [];
        foreach (['max-jobs' => $maxJobs, 'max-time' => $maxTime] as $name => $value) {
            $value = (string) ($value ?? '0');
            if (!ctype_digit($value) || strlen($value) > 12) {
                throw new \InvalidArgumentException("drover: --$name must be a whole number (0: no limit), got '$value'");
            }
            if ((int) $value > 0) {
                $flags[] = "--$name";
                $flags[] = $name === 'max-time' ? "{$value}s" : $value;
            }
        }
        return $flags;
    }

    /** Why this environment has no pools, naming the entries. */
    private function noPools(array $config): string
    {
        $environment = $this->laravel->environment();
        $entry = Pools::matchedEnvironment($config, $environment);
        if ($entry === null) {
            $entries = array_keys($config['environments'] ?? []);
            return sprintf(
                "drover: no entry of drover.environments matches environment '%s' (entries: %s): this master runs no workers",
                $environment,
                $entries === [] ? 'none' : implode(', ', $entries),
            );
        }
        return "drover: environment '$environment' uses drover.environments.$entry, which with drover.defaults defines no pools: this master runs no workers";
    }
}
