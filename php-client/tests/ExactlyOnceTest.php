<?php

namespace Drover\Tests;

use Drover\Console\WorkCommand;
use Drover\Contracts\CompletesInTransaction;
use Drover\Jobs\ExactlyOnce;
use Drover\Protocol\Channel;
use Drover\Worker\Feeder;
use Drover\Worker\LaravelWorker;
use Illuminate\Bus\Queueable;
use Illuminate\Container\Container;
use Illuminate\Contracts\Debug\ExceptionHandler;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Application;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\WorkerOptions;
use Illuminate\Support\Facades\DB;
use Illuminate\Support\Facades\Facade;
use PHPUnit\Framework\TestCase;

/**
 * Exactly once for what a job writes (issue 59): Laravel jobs run by drover's Laravel worker
 * (LaravelWorker, Laravel's own Worker::runNextJob) in this process, on the test PostgreSQL with
 * drover's schema (migration 0015), the test playing the master on the other end of the worker's
 * channel. A job's row in drover.jobs is pushed through the real `drover` queue connection and
 * leased as a master leases it. Failures go through the package's own failure listener
 * (WorkCommand) into Laravel's failer (public.failed_jobs).
 */
final class ExactlyOnceTest extends TestCase
{
    private static ?Application $app = null;

    private \PDO $pdo;

    /** @var resource the master's end of the worker's channel */
    private $master;

    private LaravelWorker $worker;

    private WorkerOptions $options;

    public static function setUpBeforeClass(): void
    {
        self::$app = DashboardApp::boot()->app;
        $command = new WorkCommand();
        $command->setLaravel(self::$app);
        (fn () => $this->listenForFailures())->call($command);
    }

    protected function setUp(): void
    {
        $app = self::$app;
        Container::setInstance($app);
        Facade::clearResolvedInstances();
        Facade::setFacadeApplication($app);
        $this->pdo = PostgresServer::get()->pdo();
        $this->pdo->exec('CREATE TABLE IF NOT EXISTS public.failed_jobs (id bigserial PRIMARY KEY, uuid varchar(255) UNIQUE, connection text NOT NULL,
            queue text NOT NULL, payload text NOT NULL, exception text NOT NULL, failed_at timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP)');
        $this->pdo->exec('CREATE TABLE IF NOT EXISTS public.exactly_once_effects (id bigserial PRIMARY KEY, note text NOT NULL)');
        $this->pdo->exec('TRUNCATE drover.jobs, drover.completions, drover.job_steps, public.failed_jobs, public.exactly_once_effects');
        putenv('DROVER_PROTOCOL=4');
        WritesARow::$failed = [];
        ChargesOnce::$keys = [];
        [$master, $worker] = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, STREAM_IPPROTO_IP);
        $this->master = $master;
        $this->worker = (new LaravelWorker($app['queue'], $app['events'], $app[ExceptionHandler::class], fn () => false))
            ->setFeeder(new Feeder(new Channel($worker)));
        $this->options = new WorkerOptions('drover:test', 0, 512, 60, 0, 3);
    }

    protected function tearDown(): void
    {
        putenv('DROVER_PROTOCOL');
        self::$app['db']->connection('pgsql')->rollBack(0);
    }

    public function testAJobCompletingInTransactionCommitsItsWritesWithItsCompletion(): void
    {
        [$id, $token] = $this->leased(new WritesARow('paid'));
        $this->assertSame([['t' => 'done', 'within' => true, 'job' => $id, 'token' => $token]], $this->handOut($id, $token));
        $this->assertSame(['paid'], $this->effects());
        $this->assertFalse($this->jobExists($id), 'completed in the job\'s transaction: its row is gone');
        $completion = $this->pdo->query("SELECT lease_token, lease_owner, queue, attempt FROM drover.completions WHERE job_id = $id")->fetch(\PDO::FETCH_ASSOC);
        $this->assertSame(['lease_token' => $token, 'lease_owner' => 1, 'queue' => 'default', 'attempt' => 1], $completion);
        $this->assertSame(0, $this->rows('public.failed_jobs'));
    }

    public function testAMasterOfProtocol3IsToldAPlainDone(): void
    {
        putenv('DROVER_PROTOCOL=3');
        [$id, $token] = $this->leased(new WritesARow('paid'));
        $this->assertSame([['t' => 'done', 'job' => $id, 'token' => $token]], $this->handOut($id, $token));
        $this->assertFalse($this->jobExists($id), 'completed all the same');
        $this->assertSame(1, $this->rows('drover.completions'));
    }

    public function testALeaseTakenBackRollsTheWritesBackAndReleasesTheJobWithoutFailingIt(): void
    {
        // The last of its tries: a failure path would fail it for good.
        [$id, $token] = $this->leased(new WritesARow('paid twice?'), attempts: 3);
        $this->pdo->exec("UPDATE drover.jobs SET lease_token = lease_token + 1 WHERE id = $id"); // another master holds it now
        $this->assertSame([['t' => 'release', 'delay_ms' => 0, 'job' => $id, 'token' => $token]], $this->handOut($id, $token, attempts: 3));
        $this->assertSame([], $this->effects(), 'rolled back with the refused completion');
        $this->assertTrue($this->jobExists($id), 'the job stays with whoever holds it now');
        $this->assertSame(0, $this->rows('drover.completions'));
        $this->assertSame(0, $this->rows('public.failed_jobs'), 'no failed_jobs row');
        $this->assertSame([], WritesARow::$failed, 'no failed() callback');
    }

    public function testAJobThatThrowsIsRolledBackAndFailsTheLaravelWay(): void
    {
        [$id, $token] = $this->leased(new WritesARow('boom', then: 'throw'), attempts: 3);
        $frames = $this->handOut($id, $token, attempts: 3);
        $this->assertCount(1, $frames);
        $this->assertSame(['fail', true], [$frames[0]['t'], $frames[0]['logged'] ?? null]);
        $this->assertStringStartsWith('RuntimeException: boom: boom', $frames[0]['error']);
        $this->assertSame([], $this->effects(), 'rolled back');
        $this->assertSame(1, $this->rows('public.failed_jobs'), 'logged by Laravel\'s failer');
        $this->assertSame(['boom'], WritesARow::$failed);
        $this->assertTrue($this->jobExists($id), 'the master deletes it on `fail`');
        $this->assertSame(0, $this->rows('drover.completions'));
    }

    public function testAJobThatReleasesItselfKeepsItsWritesWithoutACompletion(): void
    {
        [$id, $token] = $this->leased(new WritesARow('half done', then: 'release'));
        $this->assertSame([['t' => 'release', 'delay_ms' => 30000, 'job' => $id, 'token' => $token]], $this->handOut($id, $token));
        $this->assertSame(['half done'], $this->effects(), 'committed, as Laravel commits them');
        $this->assertTrue($this->jobExists($id));
        $this->assertSame(0, $this->rows('drover.completions'));
    }

    public function testAJobThatFailsItselfKeepsItsWritesAndItsFailureWithoutACompletion(): void
    {
        [$id, $token] = $this->leased(new WritesARow('given up', then: 'fail'));
        $frames = $this->handOut($id, $token);
        $this->assertSame([['fail', true]], array_map(fn (array $f) => [$f['t'], $f['logged'] ?? null], $frames), 'told once the transaction with the failer\'s row committed');
        $this->assertSame(['given up'], $this->effects());
        $this->assertSame(1, $this->rows('public.failed_jobs'));
        $this->assertSame(['given up'], WritesARow::$failed);
        $this->assertSame(0, $this->rows('drover.completions'));
    }

    public function testCompleteWithinInsideTheJobsOwnTransaction(): void
    {
        [$id, $token] = $this->leased(new CompletesItself('own'));
        $this->assertSame([['t' => 'done', 'within' => true, 'job' => $id, 'token' => $token]], $this->handOut($id, $token));
        $this->assertSame(['own'], $this->effects());
        $this->assertFalse($this->jobExists($id));
        $this->assertSame(1, $this->rows('drover.completions'));

        // Completed and committed, then it threw: complete all the same, not failed.
        [$id, $token] = $this->leased(new CompletesItself('then threw', how: 'throw after commit'), attempts: 3);
        $this->assertSame([['t' => 'done', 'within' => true, 'job' => $id, 'token' => $token]], $this->handOut($id, $token, attempts: 3));
        $this->assertFalse($this->jobExists($id));
        $this->assertSame(0, $this->rows('public.failed_jobs'));
    }

    public function testARollbackAfterCompleteWithinUndoesTheCompletion(): void
    {
        [$id, $token] = $this->leased(new CompletesItself('undone', how: 'roll back'));
        $this->assertSame([['t' => 'release', 'delay_ms' => 0, 'job' => $id, 'token' => $token]], $this->handOut($id, $token), 'retried as usual');
        $this->assertSame([], $this->effects());
        $this->assertTrue($this->jobExists($id));
        $this->assertSame(0, $this->rows('drover.completions'));
    }

    public function testCompleteWithinOutsideATransactionSaysHowToCallIt(): void
    {
        [$id, $token] = $this->leased(new CompletesItself('nowhere', how: 'outside'), attempts: 3);
        $frames = $this->handOut($id, $token, attempts: 3);
        $this->assertSame('fail', $frames[0]['t']);
        $this->assertStringContainsString('called completeWithin() outside a transaction on connection pgsql', $frames[0]['error']);
        $this->assertStringContainsString("DB::connection('pgsql')->transaction(function () { ... })", $frames[0]['error']);
        $this->assertTrue($this->jobExists($id), 'not completed');
    }

    public function testALeaseTakenBackUnderCompleteWithinIsNotFailed(): void
    {
        [$id, $token] = $this->leased(new CompletesItself('too late'), attempts: 3);
        $this->pdo->exec("UPDATE drover.jobs SET lease_token = lease_token + 1 WHERE id = $id");
        $this->assertSame([['t' => 'release', 'delay_ms' => 0, 'job' => $id, 'token' => $token]], $this->handOut($id, $token, attempts: 3));
        $this->assertSame([], $this->effects());
        $this->assertSame(0, $this->rows('public.failed_jobs'));
    }

    public function testAStepRunsOnceAcrossAttemptsAndOutlivesTheJobsRollback(): void
    {
        [$id, $token] = $this->leased(new ChargesOnce());
        $uuid = json_decode((string) $this->pdo->query("SELECT payload FROM drover.jobs WHERE id = $id")->fetchColumn(), true)['uuid'];
        $this->assertSame([['t' => 'release', 'delay_ms' => 0, 'job' => $id, 'token' => $token]], $this->handOut($id, $token), 'the first attempt dies after its charge');
        $this->assertSame(["drover:$uuid:charge"], ChargesOnce::$keys, 'charged once, under the step\'s key');
        $this->assertSame([], $this->effects(), 'the job\'s transaction rolled back…');
        $this->assertSame(1, $this->rows('drover.job_steps'), '…the step\'s record did not');

        // The master hands it out again: another lease, the same payload.
        $again = $token + 1;
        $this->pdo->exec("UPDATE drover.jobs SET lease_token = $again, attempts = 2 WHERE id = $id");
        $this->assertSame([['t' => 'done', 'within' => true, 'job' => $id, 'token' => $again]], $this->handOut($id, $again, attempts: 2));
        $this->assertSame(["drover:$uuid:charge"], ChargesOnce::$keys, 'not charged again');
        $this->assertSame(["charge for drover:$uuid:charge"], $this->effects(), 'the recorded result came back, as the object it was');
    }

    public function testOutsideADroverWorkerOnceJustCallsAndCompleteWithinDoesNothing(): void
    {
        $job = new CompletesItself('sync');
        $job->completeWithin();
        $key = $job->once('charge', fn (string $key) => $key);
        $this->assertMatchesRegularExpression('/^drover:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}:charge$/', $key);
        $this->assertSame(0, $this->rows('drover.job_steps'));
        foreach (['' => 'got an empty one', str_repeat('é', 201) => 'got 201'] as $step => $said) {
            try {
                $job->once((string) $step, fn () => null);
                $this->fail('expected an InvalidArgumentException');
            } catch (\InvalidArgumentException $e) {
                $this->assertStringContainsString("a step's name (once()) must be 1 to 200 characters, $said", $e->getMessage());
            }
        }
        $this->assertSame('x', $job->once(str_repeat('é', 200), fn () => 'x'));
    }

    /**
     * Pushes $job on the `drover` queue connection and leases it as a master does (owner node 1,
     * `$attempts` counted): [its id, the lease's token].
     *
     * @return array{0: int, 1: int}
     */
    private function leased(object $job, int $attempts = 1): array
    {
        $id = (int) self::$app['queue']->connection('drover')->push($job);
        $token = random_int(1, 1 << 40);
        $this->pdo->prepare("UPDATE drover.jobs SET lease_token = ?, lease_owner = 1, lease_expires_at = now() + interval '1 minute', attempts = ? WHERE id = ?")
            ->execute([$token, $attempts, $id]);
        return [$id, $token];
    }

    /**
     * Hands job $id to the worker under lease $token and runs it (Laravel's runNextJob): what the
     * worker told the master after `started`.
     *
     * @return list<array<string, mixed>>
     */
    private function handOut(int $id, int $token, int $attempts = 1): array
    {
        $payload = (string) $this->pdo->query("SELECT payload FROM drover.jobs WHERE id = $id")->fetchColumn();
        fwrite($this->master, json_encode(['t' => 'job', 'job' => $id, 'token' => $token, 'queue' => 'default', 'attempts' => $attempts, 'max_attempts' => null, 'payload' => $payload]) . "\n");
        $this->worker->runNextJob('drover', 'default', $this->options);
        $frames = $this->sent();
        $this->assertSame(['t' => 'started', 'job' => $id, 'token' => $token], array_shift($frames));
        $this->assertSame(0, self::$app['db']->connection('pgsql')->transactionLevel(), 'no transaction left open');
        return $frames;
    }

    /** @return list<array<string, mixed>> the frames the worker has sent */
    private function sent(): array
    {
        $frames = [];
        $read = [$this->master];
        $w = $e = null;
        while (stream_select($read, $w, $e, 0) > 0) {
            $frames[] = json_decode((string) fgets($this->master), true);
            $read = [$this->master];
        }
        return $frames;
    }

    /** @return list<string> the notes the jobs' writes left, in order */
    private function effects(): array
    {
        return $this->pdo->query('SELECT note FROM public.exactly_once_effects ORDER BY id')->fetchAll(\PDO::FETCH_COLUMN);
    }

    private function jobExists(int $id): bool
    {
        return (bool) $this->pdo->query("SELECT count(*) FROM drover.jobs WHERE id = $id")->fetchColumn();
    }

    private function rows(string $table): int
    {
        return (int) $this->pdo->query("SELECT count(*) FROM $table")->fetchColumn();
    }
}

/** Writes a row, then completes, throws, releases itself or fails itself; in the worker's transaction. */
final class WritesARow implements ShouldQueue, CompletesInTransaction
{
    use InteractsWithQueue, Queueable;

    /** @var list<string> the notes of the jobs whose failed() ran */
    public static array $failed = [];

    public function __construct(public string $note, public string $then = 'complete')
    {
    }

    public function handle(): void
    {
        DB::table('exactly_once_effects')->insert(['note' => $this->note]);
        match ($this->then) {
            'throw' => throw new \RuntimeException("{$this->note}: boom"),
            'release' => $this->release(30),
            'fail' => $this->fail(new \RuntimeException('gave up')),
            default => null,
        };
    }

    public function failed(\Throwable $e): void
    {
        self::$failed[] = $this->note;
    }
}

/** Completes itself inside its own transaction (ExactlyOnce::completeWithin()), or tries to. */
final class CompletesItself implements ShouldQueue
{
    use InteractsWithQueue, Queueable, ExactlyOnce;

    public function __construct(public string $note, public string $how = 'inside')
    {
    }

    public function handle(): void
    {
        if ($this->how === 'outside') {
            DB::table('exactly_once_effects')->insert(['note' => $this->note]);
            $this->completeWithin();
            return;
        }
        DB::transaction(function () {
            DB::table('exactly_once_effects')->insert(['note' => $this->note]);
            DB::transaction(fn () => $this->completeWithin()); // a savepoint: commits with the outermost
            if ($this->how === 'roll back') {
                throw new \RuntimeException('changed its mind after completing');
            }
        });
        if ($this->how === 'throw after commit') {
            throw new \RuntimeException('thrown after the commit');
        }
    }
}

/** Charges once (a step), writes, and dies on its first attempt; in the worker's transaction. */
final class ChargesOnce implements ShouldQueue, CompletesInTransaction
{
    use InteractsWithQueue, Queueable, ExactlyOnce;

    /** @var list<string> the keys the charge was made under, one per call */
    public static array $keys = [];

    public function handle(): void
    {
        $receipt = $this->once('charge', function (string $key): Receipt {
            self::$keys[] = $key;
            return new Receipt("charge for $key");
        });
        DB::table('exactly_once_effects')->insert(['note' => $receipt->id()]);
        if ($this->job->attempts() === 1) {
            throw new \RuntimeException('the worker dies after the charge');
        }
    }
}

/** A step's result with a private property (serialize() writes NUL bytes for it). */
final class Receipt
{
    public function __construct(private string $id)
    {
    }

    public function id(): string
    {
        return $this->id;
    }
}
