<?php

namespace Drover\Schema;

/**
 * A read the drover binary makes too, from the one SQL file both run:
 * `broker/queries/shared/NAME.sql` of this package, which the binary embeds (the Composer dist
 * ships that directory, as it ships broker/migrations). The dashboard, the artisan commands and
 * the master therefore cannot mean different things by a queue's oldest wait, its groups or its
 * pause; php-client/tests/SharedReadsTest.php and broker/tests/shared_reads.rs check that both
 * sides give the same answers on the same rows (php-client/tests/fixtures/shared_reads.*).
 *
 * The files number their parameters as PostgreSQL does ($1, $2, ...). PDO takes `?`, one per
 * occurrence (native or emulated prepares alike), so the text is rewritten once, without its
 * comments, and bindings() lays the parameters out in the order of the `?`s. The files use no
 * dollar quoting, no E'' strings and no `?` operator (the rewrite refuses the last).
 */
final class BrokerQuery
{
    /** @var array<string, self> the files read so far in this process, by name */
    private static array $loaded = [];

    /**
     * @param string $name the file's name without `.sql`
     * @param string $sql the statement as PDO takes it: `?` placeholders, no comments
     * @param list<int> $order for each `?`, the number of the parameter it stands for ($1 is 1)
     * @param int $parameters how many parameters the statement takes (its highest $n)
     */
    private function __construct(
        public readonly string $name,
        public readonly string $sql,
        private readonly array $order,
        private readonly int $parameters,
    ) {
    }

    /** Where the shared statements are: this package's own. */
    public static function directory(): string
    {
        return dirname(__DIR__, 3) . '/broker/queries/shared';
    }

    /**
     * The names of the shared statements.
     *
     * @return list<string>
     */
    public static function names(): array
    {
        $names = array_map(static fn (string $path) => basename($path, '.sql'), glob(self::directory() . '/*.sql') ?: []);
        sort($names);
        return $names;
    }

    /** The shared statement `$name` (read once per process). */
    public static function named(string $name): self
    {
        if (isset(self::$loaded[$name])) {
            return self::$loaded[$name];
        }
        $path = self::directory() . "/$name.sql";
        $text = is_file($path) ? file_get_contents($path) : false;
        if ($text === false) {
            throw new \LogicException("drover: the shared statement $name is not in " . self::directory() . ' (an incomplete install of drover/laravel?)');
        }
        [$sql, $order] = self::forPdo($name, $text);
        return self::$loaded[$name] = new self($name, $sql, $order, $order === [] ? 0 : max($order));
    }

    /**
     * The bindings for PDO: `$params` are $1, $2, ... in order, each repeated where the statement
     * uses it again.
     *
     * @param list<mixed> $params
     * @return list<mixed>
     */
    public function bindings(array $params): array
    {
        if (count($params) !== $this->parameters) {
            throw new \LogicException("drover: the shared statement {$this->name} takes {$this->parameters} parameters, not " . count($params));
        }
        $params = array_values($params);
        return array_map(static fn (int $n) => $params[$n - 1], $this->order);
    }

    /**
     * A list of names as the `text[]` parameter the statements take (`$1::text[]`).
     *
     * @param list<string> $names
     */
    public static function textArray(array $names): string
    {
        return '{' . implode(',', array_map(static fn (string $n) => '"' . addcslashes($n, '"\\') . '"', $names)) . '}';
    }

    /**
     * `$text` with its comments dropped and each `$n` turned into `?`, and the `$n` of each `?`.
     *
     * @return array{0: string, 1: list<int>}
     */
    private static function forPdo(string $name, string $text): array
    {
        $sql = '';
        $order = [];
        $i = 0;
        $n = strlen($text);
        while ($i < $n) {
            $c = $text[$i];
            $next = $text[$i + 1] ?? '';
            if ($c === '-' && $next === '-') {
                $end = strpos($text, "\n", $i);
                $i = $end === false ? $n : $end;
            } elseif ($c === '/' && $next === '*') {
                $end = strpos($text, '*/', $i + 2);
                if ($end === false) {
                    throw new \LogicException("drover: the shared statement $name has an unterminated comment");
                }
                $sql .= ' ';
                $i = $end + 2;
            } elseif ($c === "'" || $c === '"') {
                // A literal or a quoted name, with its doubled quotes, copied as it is.
                $end = $i;
                do {
                    $end = strpos($text, $c, $end + 1);
                    if ($end === false) {
                        throw new \LogicException("drover: the shared statement $name has an unterminated $c");
                    }
                    $doubled = ($text[$end + 1] ?? '') === $c;
                    $end += $doubled ? 1 : 0;
                } while ($doubled);
                $sql .= substr($text, $i, $end - $i + 1);
                $i = $end + 1;
            } elseif ($c === '$' && preg_match('/\G\$([1-9][0-9]*)/', $text, $m, 0, $i) === 1) {
                $sql .= '?';
                $order[] = (int) $m[1];
                $i += strlen($m[0]);
            } elseif ($c === '?') {
                throw new \LogicException("drover: the shared statement $name uses ?, which PDO would take for a parameter");
            } else {
                $sql .= $c;
                $i++;
            }
        }
        return [trim($sql), $order];
    }
}
