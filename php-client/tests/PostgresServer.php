<?php

namespace Drover\Tests;

/**
 * A private PostgreSQL cluster for the PHP tests: initdb + postgres from the machine's install, as
 * the `postgres` OS user when running as root, a Unix socket in a temporary directory, drover's
 * schema applied from the broker's migrations (all of them, in order). One per test process; removed at exit.
 */
final class PostgresServer
{
    private static ?self $instance = null;

    private string $dir;

    private string $bin;

    /** @var resource */
    private $process;

    private function __construct()
    {
        $bins = glob('/usr/lib/postgresql/*/bin/postgres') ?: [];
        natsort($bins);
        if ($bins === []) {
            throw new \RuntimeException('PostgreSQL server binaries not found; run scripts/setup');
        }
        $this->bin = dirname((string) end($bins));
        $this->dir = sys_get_temp_dir() . '/drover-php-' . getmypid() . '-' . bin2hex(random_bytes(3));
        mkdir($this->dir, 0755);
        $asUser = posix_geteuid() === 0 ? ['runuser', '-u', 'postgres', '--'] : [];
        if ($asUser !== []) {
            chown($this->dir, 'postgres');
        }
        $this->run([...$asUser, "{$this->bin}/initdb", '-D', "{$this->dir}/data", '-U', 'drover', '-A', 'trust', '-E', 'UTF8', '--no-locale', '-N']);
        // max_connections: PHPUnit keeps every test object, and the connections its tests opened,
        // to the end of the run; the suite outgrew PostgreSQL's default of 100.
        $cmd = [...$asUser, "{$this->bin}/postgres", '-D', "{$this->dir}/data", '-k', $this->dir, '-c', 'listen_addresses=', '-c', 'fsync=off', '-c', 'max_connections=400'];
        $this->process = proc_open($cmd, [0 => ['file', '/dev/null', 'r'], 1 => ['file', "{$this->dir}/log", 'a'], 2 => ['file', "{$this->dir}/log", 'a']], $pipes, '/');
        $deadline = microtime(true) + 30;
        while (true) {
            try {
                $pdo = new \PDO("pgsql:host={$this->dir};dbname=postgres;user=drover");
                break;
            } catch (\PDOException $e) {
                if (microtime(true) > $deadline) {
                    throw new \RuntimeException('test PostgreSQL did not start: ' . @file_get_contents("{$this->dir}/log"));
                }
                usleep(50000);
            }
        }
        $pdo->exec('CREATE DATABASE drover');
        $db = $this->pdo();
        $db->exec('CREATE SCHEMA drover');
        $migrations = glob(__DIR__ . '/../../broker/migrations/*.sql');
        sort($migrations);
        foreach ($migrations as $migration) {
            $db->exec((string) file_get_contents($migration));
        }
        register_shutdown_function([$this, 'stop']);
    }

    public static function get(): self
    {
        return self::$instance ??= new self();
    }

    public function socketDir(): string
    {
        return $this->dir;
    }

    public function dsn(): string
    {
        return "pgsql:host={$this->dir};dbname=drover;user=drover";
    }

    public function pdo(): \PDO
    {
        $pdo = new \PDO($this->dsn());
        $pdo->setAttribute(\PDO::ATTR_ERRMODE, \PDO::ERRMODE_EXCEPTION);
        return $pdo;
    }

    public function stop(): void
    {
        if (is_resource($this->process)) {
            $asUser = posix_geteuid() === 0 ? ['runuser', '-u', 'postgres', '--'] : [];
            $this->run([...$asUser, "{$this->bin}/pg_ctl", '-D', "{$this->dir}/data", '-m', 'fast', '-w', 'stop']);
            proc_close($this->process);
        }
        exec('rm -rf ' . escapeshellarg($this->dir));
    }

    /** @param list<string> $cmd */
    private function run(array $cmd): void
    {
        $p = proc_open($cmd, [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, '/');
        $out = stream_get_contents($pipes[1]) . stream_get_contents($pipes[2]);
        if (proc_close($p) !== 0) {
            throw new \RuntimeException(implode(' ', $cmd) . " failed:\n$out");
        }
    }
}
