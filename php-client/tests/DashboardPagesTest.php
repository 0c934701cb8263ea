<?php

namespace Drover\Tests;

use Drover\Dashboard\Actions\ApplyBulkAction;
use Drover\Dashboard\Redaction;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Support\Facades\Bus;
use PHPUnit\Framework\TestCase;

require_once __DIR__ . '/DashboardApp.php';

/**
 * The dashboard's pages as Laravel's HTTP kernel renders them, over a real PostgreSQL and real
 * payloads pushed through a `drover` connection (issue 56, docs/dashboard.md):
 *
 * - no secret of a chain (its later jobs' properties, a serialized value and JSON in a
 *   property, a URL's credentials), a closure (its `use` variables and code, a chain's catch
 *   callback) or a failing HTTP call (credentials in a URL and its query, a bearer token, a JSON
 *   body) reaches any page, search result or the audit trail — nor the text an operator
 *   searched for, which the audit trail's row withholds;
 * - a bulk action acts on what its preview matched: not on a delayed job that fell due since nor
 *   a running job released back, and its page says so; a confirmation without its preview, or
 *   with one altered, is refused;
 * - a stop names the attempt its page showed, and is refused once that attempt has ended.
 */
final class DashboardPagesTest extends TestCase
{
    private static ?DashboardApp $dashboard = null;

    private \PDO $pdo;

    /** What no viewer may read, wherever it was put. */
    private const SECRETS = [
        'card' => '4242424242424242',
        'access token (property)' => 'tok_live_123',
        'URL password' => 's3cr3tpass',
        'URL query token' => 'qtokXYZ987',
        'private key' => 'pk_55667788',
        'client secret' => 'csec_3344',
        'serialized in a property' => 'cvvsecret3141',
        'JSON in a property' => 'jsonpw_777',
        'closure variable' => 'sk_closure_789',
        'closure code' => 'code-literal-4321',
        'catch callback' => 'catch-literal-1111',
        'bearer token' => 'bearerabc.def42',
        'JSON body secret' => 'csk_555',
        'cookie' => 'sessvalue_9090',
    ];

    public static function setUpBeforeClass(): void
    {
        self::$dashboard ??= DashboardApp::boot();
    }

    protected function setUp(): void
    {
        $this->pdo = PostgresServer::get()->pdo();
        $this->pdo->exec('CREATE TABLE IF NOT EXISTS public.failed_jobs (id bigserial PRIMARY KEY, uuid varchar(255) UNIQUE, connection text NOT NULL,
            queue text NOT NULL, payload text NOT NULL, exception text NOT NULL, failed_at timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP)');
        $this->pdo->exec('TRUNCATE drover.jobs, drover.failed_jobs, drover.recent_jobs, drover.groups, drover.group_jobs, drover.console_actions,
            drover.stop_requests, drover.nodes, drover.schedule_runs, public.failed_jobs CASCADE');
        DashboardApp::$operator = false;
    }

    private function dashboard(): DashboardApp
    {
        return self::$dashboard;
    }

    /** The exception a failing HTTP call throws, with a trace whose frames hold the URL. */
    private static function failedCall(string $url): \RuntimeException
    {
        return new \RuntimeException(
            "cURL error 7: Failed to connect to api.example.com port 443 for $url\n"
            . "Request: POST /v1/charge Authorization: Bearer bearerabc.def42\n"
            . "Cookie: laravel_session=sessvalue_9090; theme=dark\n"
            . 'Response: {"error":"denied","client_secret":"csk_555"}'
        );
    }

    private function assertNoSecret(string $where, string $body): void
    {
        foreach (self::SECRETS as $what => $secret) {
            $this->assertStringNotContainsString($secret, $body, "$where shows the $what");
        }
    }

    public function testNoSecretOfAChainAClosureOrAFailingHttpCallReachesAnyPageSearchOrTheAuditTrail(): void
    {
        $url = 'https://ops:s3cr3tpass@api.example.com/v1/charge?access_token=qtokXYZ987&amount=5';
        // A chain: its first job carries the next ones as serialized strings — a charge holding
        // secrets, a closure job, and a catch callback.
        $plain = 'sk_closure_789';
        Bus::chain([
            new PagesFirstStep(),
            new PagesCharge($url),
            function () use ($plain) {
                return 'code-literal-4321' . $plain;
            },
        ])->catch(fn () => 'catch-literal-1111')->onConnection('drover')->onQueue('pages')->dispatch();
        $chain = (int) $this->pdo->query("SELECT id FROM drover.jobs WHERE queue = 'pages'")->fetchColumn();
        // A closure job of its own.
        app('queue')->connection('drover')->push(\Illuminate\Queue\CallQueuedClosure::create(function () use ($plain) {
            return $plain . 'code-literal-4321';
        }), '', 'closures');
        $closure = (int) $this->pdo->query("SELECT id FROM drover.jobs WHERE queue = 'closures'")->fetchColumn();
        $payload = (string) $this->pdo->query("SELECT payload FROM drover.jobs WHERE id = $chain")->fetchColumn();
        foreach (['4242424242424242', 'cvvsecret3141', 'sk_closure_789', 'catch-literal-1111'] as $secret) {
            $this->assertStringContainsString($secret, $payload, 'the fixture carries its secrets');
        }
        // The failing HTTP call: in Laravel's failer (with its trace), as a retried job's last
        // failure, as drover's kept job, and as the error holding a group.
        ini_set('zend.exception_ignore_args', '0');
        $exception = self::failedCall($url);
        app('queue.failer')->log('drover', 'default', $payload, $exception);
        $failed = (string) $this->pdo->query('SELECT uuid FROM public.failed_jobs')->fetchColumn();
        $message = $exception->getMessage();
        $st = $this->pdo->prepare("INSERT INTO drover.jobs (queue, payload, attempts, failure) VALUES ('retried', ?, 1, ?) RETURNING id");
        $st->execute([$payload, $message]);
        $retried = (int) $st->fetchColumn();
        $this->pdo->prepare("INSERT INTO drover.failed_jobs (id, queue, payload, attempts, error, failed_at) VALUES (990001, 'kept', ?, 3, ?, now())")->execute([$payload, $message]);
        $this->pdo->prepare("INSERT INTO drover.groups (queue, name, head, held_by, held_uuid, held_at, held_error) VALUES ('pages', 'order-1', NULL, 990002, 'held-uuid', now(), ?)")->execute([$message]);
        // A scheduled run whose command line and output carry credentials.
        $this->pdo->prepare("INSERT INTO drover.schedule_runs (task, summary, due_at, scope, host, status, reason, output_tail)
            VALUES ('backup', 'php artisan backup --password=s3cr3tpass', now(), '', 'web-1', 'failed', ?, ?)")->execute([$message, "connecting to $url\nAuthorization: Bearer bearerabc.def42"]);
        // The chain's first job, completed, in the history.
        $this->pdo->prepare("INSERT INTO drover.recent_jobs (id, attempt, queue, class, payload, node, hostname, worker_pid, started_at, finished_at, runtime_ms)
            VALUES (?, 1, 'pages', ?, ?, 1, 'web-1', 42, now(), now(), 1.5)")->execute([$chain, PagesFirstStep::class, $payload]);

        $pages = [
            '/drover/jobs/pending', "/drover/job/$chain", "/drover/job/$closure", "/drover/job/$retried",
            '/drover/completed', "/drover/completed/$chain/1", '/drover/failed', "/drover/failed/$failed",
            '/drover/search?state=pending', '/drover/search?state=pending&queue=retried', '/drover/search?state=failed',
            '/drover/search?state=kept', '/drover/search?state=completed', '/drover/groups', '/drover/group?queue=pages&name=order-1',
            '/drover/batches', '/drover/tags?tag=x', '/drover/actions', '/drover/schedule', '/drover',
        ];
        $app = $this->dashboard();
        foreach ([false, true] as $operator) {
            foreach ($pages as $uri) {
                $this->assertNoSecret(($operator ? 'as an operator, ' : '') . $uri, $app->page($uri, $operator));
            }
        }
        // What is shown instead.
        $page = $app->page("/drover/job/$chain");
        $this->assertStringContainsString(Redaction::MARK, $page);
        $this->assertStringContainsString(Redaction::CLOSURE, $page);
        $this->assertMatchesRegularExpression('/id="chain">then Drover\\\\Tests\\\\PagesCharge → Illuminate\\\\Queue\\\\CallQueuedClosure/', $page, 'the next steps are still named');
        $this->assertStringContainsString('https://[redacted]@api.example.com/v1/charge?access_token=[redacted]&amp;amount=5', $page, 'the URL, without its credentials');
        $this->assertStringContainsString(Redaction::CLOSURE, $app->page("/drover/job/$closure"));
        $failedPage = $app->page("/drover/failed/$failed");
        foreach (['Authorization: [redacted]', 'Cookie: [redacted]', '&quot;client_secret&quot;:&quot;[redacted]&quot;', 'cURL error 7', 'Stack trace'] as $shown) {
            $this->assertStringContainsString($shown, $failedPage);
        }
        $this->assertStringContainsString('cURL error 7: Failed to connect to api.example.com port 443 for https://[redacted]@api.example.com', $app->page('/drover/search?state=kept'), 'the exception column');
        $this->assertStringContainsString('php artisan backup --password=[redacted]', $app->page('/drover/schedule'), 'a run\'s command line');

        // A viewer cannot search exceptions or payloads for text: a match would tell a secret.
        $refused = $app->page('/drover/search?state=failed&exception=s3cr3tpass');
        $this->assertStringContainsString('exception searches whole exceptions, what the dashboard redacts included, so it is for those the operateDrover gate allows', $refused);
        // An operator may; the audit trail keeps the text withheld. Delete what holds a secret.
        $confirm = $app->page('/drover/actions/confirm?state=pending&text=tok_live_123&verb=delete', true);
        $this->assertMatchesRegularExpression('/<b>2 jobs<\/b>/', $confirm, 'the chain and the retried job hold that text');
        $response = $app->request('POST', '/drover/actions', ['preview' => self::token($confirm)], true);
        $this->assertSame(302, $response->getStatusCode(), DashboardApp::why($response));
        $row = $this->pdo->query('SELECT id, state, outcome, target::text AS target FROM drover.console_actions ORDER BY id DESC LIMIT 1')->fetch(\PDO::FETCH_ASSOC);
        $this->assertSame('done', $row['state'], (string) $row['outcome']);
        $this->assertNoSecret('the action\'s row in drover.console_actions', $row['target']);
        $this->assertStringContainsString('"text": "[withheld]"', $row['target']);
        foreach (['/drover/actions', '/drover/actions/' . $row['id']] as $uri) {
            $page = $app->page($uri);
            $this->assertNoSecret($uri, $page);
            $this->assertStringContainsString('text “[withheld]”', $page);
        }
        // What the background job carries of the withheld text is encrypted, never in clear.
        app('queue')->connection('drover')->push(new ApplyBulkAction((int) $row['id'], ['text' => 'tok_live_123']), '', 'actions');
        $queued = (string) $this->pdo->query("SELECT payload FROM drover.jobs WHERE queue = 'actions'")->fetchColumn();
        $this->assertStringNotContainsString('tok_live_123', $queued);
        $this->assertStringContainsString(Redaction::ENCRYPTED, $app->page('/drover/job/' . $this->pdo->query("SELECT id FROM drover.jobs WHERE queue = 'actions'")->fetchColumn()));
    }

    /** The signed preview a confirmation page carries. */
    private static function token(string $confirm): string
    {
        if (preg_match('/name="preview" value="([^"]+)"/', $confirm, $m) !== 1) {
            self::fail("no preview in the confirmation page:\n$confirm");
        }
        return html_entity_decode($m[1]);
    }

    public function testABulkActionActsOnlyOnWhatItsPreviewMatchedAndSaysWhatChangedSince(): void
    {
        $payload = '{"displayName":"App\\\\Jobs\\\\Grow","data":[]}';
        $insert = $this->pdo->prepare("INSERT INTO drover.jobs (queue, payload, available_at) VALUES ('grow', ?, now() + make_interval(secs => ?)) RETURNING id");
        $pending = [];
        foreach ([0, 0, 0] as $in) {
            $insert->execute([$payload, $in]);
            $pending[] = (int) $insert->fetchColumn();
        }
        $insert->execute([$payload, 0.4]);
        $delayed = (int) $insert->fetchColumn();
        $insert->execute([$payload, 0]);
        $running = (int) $insert->fetchColumn();
        $this->pdo->exec("UPDATE drover.jobs SET lease_token = nextval('drover.lease_tokens'), lease_owner = 1, lease_expires_at = now() + interval '30 s', attempts = 1 WHERE id = $running");
        $app = $this->dashboard();

        $confirm = $app->page('/drover/actions/confirm?state=pending&queue=grow&verb=delete', true);
        $this->assertMatchesRegularExpression('/id="preview">This will delete\s+<b>3 jobs<\/b>/', $confirm);
        // Since the preview: the delayed job falls due; the running one's worker dies and the
        // job is put back in its place (as release.sql does: its due time unchanged).
        usleep(450_000);
        $this->pdo->exec("UPDATE drover.jobs SET lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL WHERE id = $running");
        $this->assertStringContainsString('5 jobs match', $app->page('/drover/search?state=pending&queue=grow'));

        // Without its preview, or with one altered, a confirmation is refused.
        $refused = $app->request('POST', '/drover/actions', ['state' => 'pending', 'queue' => 'grow', 'verb' => 'delete'], true);
        $this->assertSame(422, $refused->getStatusCode());
        $this->assertStringStartsWith('drover: `preview` is missing', DashboardApp::why($refused));
        $token = self::token($confirm);
        $forged = base64_encode((string) json_encode(['search' => ['state' => 'pending'], 'verb' => 'delete'])) . substr($token, (int) strpos($token, '.'));
        $refused = $app->request('POST', '/drover/actions', ['preview' => $forged], true);
        $this->assertSame(422, $refused->getStatusCode());
        $this->assertStringContainsString('is not a preview this application signed', DashboardApp::why($refused));

        $done = $app->request('POST', '/drover/actions', ['preview' => $token], true);
        $this->assertSame(302, $done->getStatusCode(), DashboardApp::why($done));
        $left = array_map('intval', $this->pdo->query("SELECT id FROM drover.jobs WHERE queue = 'grow' ORDER BY id")->fetchAll(\PDO::FETCH_COLUMN));
        $this->assertSame([$delayed, $running], $left, 'exactly the three previewed were deleted');
        $id = (int) $this->pdo->query('SELECT max(id) FROM drover.console_actions')->fetchColumn();
        $page = $app->page("/drover/actions/$id");
        $this->assertMatchesRegularExpression('/id="acted">3</', $page);
        $this->assertMatchesRegularExpression('/id="changed">2 /', $page);
        $this->assertMatchesRegularExpression('/id="beyond">nothing: 3 of the 3 previewed were acted on</', $page);
        $this->assertStringContainsString('3 deleted of the 3 previewed; 2 that match now but did not when previewed', $page);
    }

    public function testTheOverviewNamesAMastersProblemsAndShowsOneSilentForTwoLeasesAsSuch(): void
    {
        $unreachable = json_encode(['health' => 'degraded', 'exit_code' => 5, 'pools' => [],
            'problems' => ['database unreachable for 12 s: no job is claimed and no lease renewed until it answers']]);
        $serving = json_encode(['health' => 'serving', 'exit_code' => 0, 'problems' => [], 'pools' => []]);
        $insert = $this->pdo->prepare("INSERT INTO drover.nodes (id, hostname, pid, started_at, heartbeat_at, lease_secs, status, release)
            VALUES (?, ?, 1, now(), now() - make_interval(secs => ?), 30, ?::jsonb, '0.3.0')");
        $insert->execute([1, 'web-1', 1, $unreachable]);
        // Its last heartbeat 95 s ago, three leases: whatever its row says is as of then.
        $insert->execute([2, 'web-2', 95, $serving]);
        $page = $this->dashboard()->page('/drover');
        $this->assertStringContainsString('database unreachable for 12 s: no job is claimed', $page);
        $this->assertSame(1, substr_count($page, 'silent for'), $page);
        $this->assertMatchesRegularExpression('/web-2 <span.*?silent for 9\d s/s', $page);
    }

    public function testAStopNamesTheAttemptItsPageShowedAndIsRefusedOnceItHasEnded(): void
    {
        $this->pdo->exec("INSERT INTO drover.nodes (id, hostname, pid, started_at, heartbeat_at) VALUES (1, 'web-1', 1, now(), now())");
        $id = (int) $this->pdo->query("INSERT INTO drover.jobs (queue, payload, attempts, lease_token, lease_owner, lease_expires_at)
            VALUES ('hung', '{\"displayName\":\"App\\\\Jobs\\\\Hung\"}', 1, nextval('drover.lease_tokens'), 1, now() + interval '30 s') RETURNING id")->fetchColumn();
        $app = $this->dashboard();
        $page = $app->page("/drover/job/$id", true);
        $this->assertSame(1, preg_match('/name="lease" value="(\d+)".*name="attempt" value="(\d+)"/s', $page, $seen), $page);
        [, $lease, $attempt] = $seen;
        $this->assertSame('1', $attempt);

        // That attempt ends; the job runs again, attempt 2.
        $this->pdo->exec("UPDATE drover.jobs SET lease_token = nextval('drover.lease_tokens'), attempts = 2 WHERE id = $id");
        $stale = $app->request('POST', "/drover/job/$id/stop", ['mode' => 'graceful', 'outcome' => 'fail', 'lease' => $lease, 'attempt' => $attempt], true);
        $this->assertSame(422, $stale->getStatusCode());
        $this->assertMatchesRegularExpression("/^drover: the attempt you saw \\(lease $lease, attempt 1\\) has ended; job $id now runs attempt 2 \\(lease \\d+\\) — look again$/", DashboardApp::why($stale));
        $this->assertSame(0, (int) $this->pdo->query('SELECT count(*) FROM drover.stop_requests')->fetchColumn(), 'nothing asked of the next attempt');
        $missing = $app->request('POST', "/drover/job/$id/stop", ['mode' => 'graceful', 'outcome' => 'fail'], true);
        $this->assertSame(422, $missing->getStatusCode());
        $this->assertStringStartsWith('drover: `lease` is missing', DashboardApp::why($missing));

        // The page again: it names attempt 2, and its stop is taken — of that attempt.
        $page = $app->page("/drover/job/$id", true);
        preg_match('/name="lease" value="(\d+)".*name="attempt" value="(\d+)"/s', $page, $seen);
        $this->assertSame('2', $seen[2]);
        $asked = $app->request('POST', "/drover/job/$id/stop", ['mode' => 'kill', 'outcome' => 'release', 'lease' => $seen[1], 'attempt' => $seen[2]], true);
        $this->assertSame(302, $asked->getStatusCode(), DashboardApp::why($asked));
        $this->assertSame($seen[1], (string) $this->pdo->query("SELECT lease_token FROM drover.stop_requests WHERE job = $id")->fetchColumn());
        // Over: a stop of it now is refused by name.
        $this->pdo->exec("UPDATE drover.jobs SET lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL WHERE id = $id");
        $over = $app->request('POST', "/drover/job/$id/stop", ['lease' => $seen[1], 'attempt' => $seen[2]], true);
        $this->assertSame(422, $over->getStatusCode());
        $this->assertStringContainsString("has ended; job $id is not running: it waits on its queue — look again", DashboardApp::why($over));
    }
}

/** A chain's first job. */
final class PagesFirstStep implements ShouldQueue
{
    use Queueable;

    public function handle(): void
    {
    }
}

/** A chain's later job, holding secrets the ways jobs do. */
final class PagesCharge implements ShouldQueue
{
    use Queueable;

    public string $card_number = '4242424242424242';

    protected string $accessToken = 'tok_live_123';

    /** @var array<string, string> */
    public array $options = ['private_key' => 'pk_55667788', 'client_secret' => 'csec_3344', 'currency' => 'EUR'];

    /** A serialized value kept in a property, and JSON. */
    public string $remembered;

    public string $settings = '{"password":"jsonpw_777","retries":3}';

    public function __construct(public string $endpoint)
    {
        $this->remembered = serialize(['cvv' => 'cvvsecret3141', 'last4' => '4242']);
    }

    public function handle(): void
    {
    }
}
