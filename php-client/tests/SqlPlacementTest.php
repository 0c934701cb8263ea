<?php

namespace Drover\Tests;

use PHPUnit\Framework\TestCase;

/**
 * SQL where a reader looks for it (issue 58): only repositories and statement classes touch the
 * database. The package's entry points — controllers, console commands, listeners and the
 * dashboard's actions — call their named methods, and hold neither an SQL statement nor a call
 * that runs one on a connection (or on the DB facade). A statement written into one of them fails
 * here, naming the file and the line: move it to the repository of its concern
 * (Dashboard\Repositories\…, Control\FleetRestartRequests, Schedule\RunHistory, …).
 *
 * The files are read as PHP tokens: comments and docblocks may speak of SQL; a string that is a
 * statement, or a call that runs one, may not.
 */
final class SqlPlacementTest extends TestCase
{
    /** Where no SQL is written or run, under src/. */
    private const ENTRY_POINTS = ['Http/Controllers', 'Console', 'Listeners', 'Dashboard/Actions'];

    /** A connection's (or the DB facade's) methods that run SQL, or hand out what runs it. */
    private const RUNS_SQL = [
        'select', 'selectOne', 'selectFromWriteConnection', 'scalar', 'cursor',
        'insert', 'update', 'delete', 'statement', 'affectingStatement', 'unprepared',
        'table', 'raw', 'getPdo', 'transaction', 'beginTransaction', 'pretend',
    ];

    /** A string that is an SQL statement: its first keywords, as this package writes them. */
    private const STATEMENT = '/\b(SELECT\s|INSERT\s+INTO\b|UPDATE\s+\S+\s+SET\b|DELETE\s+FROM\b|TRUNCATE\s|WITH\s+\w+\s+AS\s*\()/';

    /**
     * Files under ENTRY_POINTS that may still hold SQL, each with why it cannot move (path under
     * src/ => why). None: every statement has moved. An entry whose file holds no SQL any more
     * fails too, so the list never outlives its reason.
     *
     * @var array<string, string>
     */
    private const ALLOWED = [];

    public function testEntryPointsHoldNoSql(): void
    {
        $found = [];
        $files = 0;
        foreach (self::ENTRY_POINTS as $dir) {
            $path = self::src() . "/$dir";
            self::assertDirectoryExists($path, "src/$dir is an entry point this test reads: say where it went");
            foreach (self::phpFiles($path) as $file) {
                $files++;
                $relative = substr($file, strlen(self::src()) + 1);
                $problems = self::sqlIn((string) file_get_contents($file));
                if (array_key_exists($relative, self::ALLOWED)) {
                    self::assertNotSame([], $problems, "src/$relative is allowed to hold SQL but holds none: remove it from SqlPlacementTest::ALLOWED");
                    continue;
                }
                foreach ($problems as [$line, $what]) {
                    $found[] = "src/$relative:$line $what";
                }
            }
        }
        self::assertGreaterThan(0, $files, 'no entry point was read');
        self::assertSame([], $found, "SQL outside the repositories and statement classes (move each to the repository of its concern):\n" . implode("\n", $found));
    }

    /** The checks themselves, on text written for them. */
    public function testItFindsStatementsAndCallsButNotWords(): void
    {
        $code = <<<'PHP'
            <?php
            // SELECT 1 FROM drover.jobs, in a comment: fine
            $db->selectOne('SELECT hostname FROM drover.nodes WHERE id = ?', [$id]);
            DB::statement("UPDATE drover.jobs SET queue = 'x'");
            \Illuminate\Support\Facades\DB::table('failed_jobs');
            $db?->delete(
                "DELETE FROM drover.groups");
            $this->table(['a'], []);
            $this->error("job $id is not in drover.jobs: select another");
            $request->query('state');
            PHP;
        self::assertSame([
            [3, 'runs SQL: ->selectOne('],
            [3, "holds an SQL statement: 'SELECT hostname FROM drover.nodes WHERE id = ?'"],
            [4, 'runs SQL: DB::statement('],
            [4, "holds an SQL statement: \"UPDATE drover.jobs SET queue = 'x'\""],
            [5, 'runs SQL: DB::table('],
            [6, 'runs SQL: ?->delete('],
            [7, 'holds an SQL statement: "DELETE FROM drover.groups"'],
        ], self::sqlIn($code));
    }

    /**
     * The SQL in PHP source $code: each statement written in a string, and each call that runs
     * SQL, as [line, what].
     *
     * @return list<array{0: int, 1: string}>
     */
    private static function sqlIn(string $code): array
    {
        $tokens = array_values(array_filter(
            token_get_all($code),
            fn ($t) => !is_array($t) || !in_array($t[0], [T_WHITESPACE, T_COMMENT, T_DOC_COMMENT], true),
        ));
        $found = [];
        foreach ($tokens as $i => $token) {
            if (!is_array($token)) {
                continue;
            }
            [$kind, $text, $line] = $token;
            if (in_array($kind, [T_CONSTANT_ENCAPSED_STRING, T_ENCAPSED_AND_WHITESPACE], true) && preg_match(self::STATEMENT, $text) === 1) {
                $found[] = [$line, 'holds an SQL statement: ' . mb_strimwidth(preg_replace('/\s+/', ' ', $text), 0, 100, '…')];
                continue;
            }
            $name = $tokens[$i + 1] ?? null;
            $call = is_array($name) && $name[0] === T_STRING && in_array($name[1], self::RUNS_SQL, true) && ($tokens[$i + 2] ?? null) === '(';
            if (!$call) {
                continue;
            }
            $before = $tokens[$i - 1] ?? null;
            $onObject = in_array($kind, [T_OBJECT_OPERATOR, T_NULLSAFE_OBJECT_OPERATOR], true)
                // A console command's own table() prints one.
                && !($name[1] === 'table' && is_array($before) && $before[1] === '$this');
            $onFacade = $kind === T_DOUBLE_COLON && is_array($before) && preg_match('/(^|\\\\)DB$/', $before[1]) === 1;
            if ($onObject || $onFacade) {
                $found[] = [$line, 'runs SQL: ' . ($onFacade ? 'DB::' : $text) . $name[1] . '('];
            }
        }
        return $found;
    }

    private static function src(): string
    {
        return dirname(__DIR__) . '/src';
    }

    /** @return list<string> the PHP files under $dir, sorted */
    private static function phpFiles(string $dir): array
    {
        $files = [];
        foreach (new \RecursiveIteratorIterator(new \RecursiveDirectoryIterator($dir, \FilesystemIterator::SKIP_DOTS)) as $file) {
            if ($file->getExtension() === 'php') {
                $files[] = $file->getPathname();
            }
        }
        sort($files);
        return $files;
    }
}
