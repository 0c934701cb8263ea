<?php

namespace Drover\Tests;

use Drover\Dashboard\HumanTime;
use Drover\Dashboard\Redaction;
use PHPUnit\Framework\TestCase;

/**
 * What the console shows of a payload: named fields redacted in the JSON and in the serialized
 * command — public, protected and private properties, nested arrays and objects — without
 * unserializing it; an encrypted command never decrypted; and text that cannot be read redacted
 * where a named field meets its value.
 */
final class RedactionTest extends TestCase
{
    public function testNamedFieldsAreRedactedInTheJsonAndTheSerializedCommand(): void
    {
        $command = new RedactionFixture('hunter2', ['card_number' => '4242424242424242', 'name' => 'Ada'], 'tok_live');
        $serialized = serialize($command);
        $payload = ['uuid' => 'u', 'displayName' => RedactionFixture::class, 'token' => 'top', 'data' => ['commandName' => RedactionFixture::class, 'command' => $serialized]];
        $shown = (new Redaction(['password', 'Card_Number', 'TOKEN']))->show($payload, (string) json_encode($payload));
        foreach (['hunter2', '4242424242424242', 'tok_live', 'top'] as $secret) {
            $this->assertStringNotContainsString($secret, $shown);
        }
        $this->assertStringContainsString('Ada', $shown, 'what is not named stays');
        $this->assertSame(4, substr_count($shown, Redaction::MARK), $shown);
        // What is shown of the command is still the serialized grammar (it could be read again).
        $redacted = (new Redaction(['password']))->serialized($serialized);
        $this->assertStringContainsString('s:10:"[redacted]";', $redacted);
        $this->assertSame(strlen($serialized) - strlen('s:7:"hunter2";') + strlen('s:10:"[redacted]";'), strlen($redacted));
    }

    public function testValuesOfEveryKindAreRedactedAndTheRestReadAsIs(): void
    {
        $o = new \stdClass();
        $o->card_number = 4111111111111111;
        $o->token = ['a' => 'secret-in-array', 'b' => [1, 2]];
        $o->password = 'ab"cd";s:3:"x';
        $o->api_key = new \ArrayObject(['deep-secret']);
        $o->kind = RedactionKind::Card;
        $o->customer = 'Ada';
        $shown = (new Redaction(['card_number', 'token', 'password', 'api_key']))->serialized(serialize($o));
        foreach (['4111111111111111', 'secret-in-array', 'ab"cd', 'deep-secret'] as $secret) {
            $this->assertStringNotContainsString($secret, $shown);
        }
        $this->assertSame(4, substr_count($shown, Redaction::MARK));
        $this->assertStringContainsString('Ada', $shown);
        $this->assertStringContainsString('RedactionKind:Card', $shown, 'an enum case is read and shown');
    }

    public function testAnEncryptedCommandIsNeverDecrypted(): void
    {
        $encrypted = base64_encode((string) json_encode(['iv' => 'aXY=', 'value' => 'c2VjcmV0', 'mac' => 'abc', 'tag' => '']));
        $payload = ['data' => ['command' => $encrypted]];
        $this->assertSame(Redaction::ENCRYPTED, (new Redaction([]))->payload($payload)['data']['command']);
    }

    public function testTextThatCannotBeReadIsRedactedWhereAFieldMeetsItsValue(): void
    {
        $redaction = new Redaction(['password']);
        $this->assertSame('{"password":"[redacted]","x":1', $redaction->text('{"password":"p\"w","x":1'));
        $this->assertSame('broken s:8:"password";s:10:"[redacted]"; tail', $redaction->text('broken s:8:"password";s:3:"abc"; tail'));
        $this->assertSame(Redaction::UNREADABLE, $redaction->serialized('O:8:"stdClass":1:{s:8:"password";s:3:"ab'), 'truncated: not shown');
    }

    public function testAChainsNextStepsAreReadWithoutUnserializing(): void
    {
        $first = new RedactionFixture('p', [], 't');
        $chained = new ChainFixture();
        $chained->chained = [serialize(new RedactionFixture('q', ['x' => 'y"z'], 'u')), serialize(new ChainFixture())];
        $payload = ['data' => ['command' => serialize($chained)]];
        $this->assertSame([RedactionFixture::class, ChainFixture::class], \Drover\Dashboard\ChainedJobs::of($payload));
        $this->assertSame([], \Drover\Dashboard\ChainedJobs::of(['data' => ['command' => serialize($first)]]));
        $this->assertSame([], \Drover\Dashboard\ChainedJobs::of(['data' => ['command' => 's:7:"chained";a:2:{i:0;s:999:"O:1:"X"']]), 'truncated: nothing');
    }

    public function testNamesArePatternsByDefaultAndConfigurationAddsRulesExactNamesStillExact(): void
    {
        $defaults = Redaction::fromConfig();
        foreach (['access_token', 'client_secret', 'api_token', 'private_key', 'apiKey', 'X-Auth-Token', 'AUTHORIZATION', 'Cookie', 'card_number', 'CVV', 'password_confirmation', "\0*\0refreshToken", 'db_password'] as $name) {
            $this->assertTrue($defaults->named($name), $name);
        }
        foreach (['name', 'keyboard', 'monkey', 'email', 'amount'] as $name) {
            $this->assertFalse($defaults->named($name), $name);
        }
        $configured = new Redaction([...Redaction::DEFAULTS, 'SSN', 'iban_*']);
        $this->assertTrue($configured->named('ssn') && $configured->named('iban_number') && $configured->named('access_token'));
        $this->assertFalse($configured->named('ssn_last4'), 'a name without * is matched exactly');
        $exact = new Redaction(['password']);
        $this->assertTrue($exact->named('Password'));
        $this->assertFalse($exact->named('password_hint'));
    }

    public function testNestedSerializedValuesAreReadAndRedactedInTurnWhatCannotBeReadIsNotShown(): void
    {
        $charge = new \stdClass();
        $charge->card_number = '4111111111111111';
        $charge->endpoint = 'https://ops:pw-in-url@api.example.com/v1?access_token=qtok&x=1';
        $first = new ChainFixture();
        $first->chained = [serialize($charge)];
        $command = new \stdClass();
        $command->step = $first;
        $command->remembered = serialize(['cvv' => '987', 'deeper' => serialize(['apiKey' => 'deep-key'])]);
        $command->settings = '{"password":"json-pw","retries":3}';
        $command->sealed = base64_encode((string) json_encode(['iv' => 'aXY=', 'value' => 'c2VjcmV0', 'mac' => 'abc', 'tag' => '']));
        $command->broken = 'O:8:"stdClass":1:{s:8:"password";s:3:"ab';
        $shown = Redaction::fromConfig()->serialized(serialize($command));
        foreach (['4111111111111111', 'pw-in-url', 'qtok', '987', 'deep-key', 'json-pw', 'c2VjcmV0', 'O:8:"stdClass":1:{s:8:"password"'] as $secret) {
            $this->assertStringNotContainsString($secret, $shown);
        }
        foreach (['https://[redacted]@api.example.com/v1?access_token=[redacted]&x=1', Redaction::ENCRYPTED, Redaction::UNREADABLE, '"retries":3'] as $kept) {
            $this->assertStringContainsString($kept, $shown);
        }
        // What is shown is still serialized data, every length right (nothing is woken to check).
        $read = unserialize($shown, ['allowed_classes' => false]);
        $this->assertInstanceOf(\__PHP_Incomplete_Class::class, $read);
        $this->assertSame(Redaction::MARK, unserialize(((array) $read)['remembered'], ['allowed_classes' => false])['cvv']);
    }

    public function testAClosureIsShownAsAClosureNeitherItsCodeNorItsVariables(): void
    {
        $secret = 'use-var-secret';
        $closure = function () use ($secret) {
            return 'code-secret' . $secret;
        };
        $forms = ['unsigned' => serialize(new \Laravel\SerializableClosure\SerializableClosure($closure))];
        \Laravel\SerializableClosure\SerializableClosure::setSecretKey('k');
        try {
            $forms['signed'] = serialize(new \Laravel\SerializableClosure\SerializableClosure($closure));
        } finally {
            \Laravel\SerializableClosure\SerializableClosure::setSecretKey(null);
        }
        // Opis' (Laravel 8 on PHP before 7.4), as it writes them: custom serialization, plain or signed.
        $inner = 'a:2:{s:3:"use";a:1:{s:6:"secret";s:14:"use-var-secret";}s:8:"function";s:28:"function () { code-secret }";}';
        $forms['opis'] = 'C:32:"Opis\Closure\SerializableClosure":' . strlen($inner) . ':{' . $inner . '}';
        $forms['opis signed'] = 'C:32:"Opis\Closure\SerializableClosure":' . (strlen($inner) + 46) . ':{@rxCLsjHKC6hvIjIVzgDKRJCeSmBcHZl4+L96PbebOE0=.' . $inner . '}';
        foreach ($forms as $form => $serialized) {
            $job = 'O:34:"Illuminate\Queue\CallQueuedClosure":1:{s:7:"closure";' . $serialized . '}';
            $shown = Redaction::fromConfig()->serialized($job);
            $this->assertStringNotContainsString('use-var-secret', $shown, $form);
            $this->assertStringNotContainsString('code-secret', $shown, $form);
            $this->assertStringContainsString(Redaction::CLOSURE, $shown, $form);
            $this->assertIsObject(unserialize($shown, ['allowed_classes' => false]), $form);
        }
    }

    public function testCustomSerializationIsShownOnlyWhenItIsItselfSerializedData(): void
    {
        $inner = 'a:1:{s:8:"password";s:2:"pw";}';
        $shown = Redaction::fromConfig()->serialized('C:3:"Foo":' . strlen($inner) . ':{' . $inner . '}');
        $redacted = 'a:1:{s:8:"password";s:10:"[redacted]";}';
        $this->assertSame('C:3:"Foo":' . strlen($redacted) . ':{' . $redacted . '}', $shown);
        $own = 'x:i:0;a:1:{i:0;s:6:"secret";};m:a:0:{}';
        $this->assertSame('s:' . strlen(Redaction::UNREADABLE) . ':"' . Redaction::UNREADABLE . '";', Redaction::fromConfig()->serialized('C:11:"ArrayObject":' . strlen($own) . ':{' . $own . '}'));
    }

    public function testExceptionsAndOtherTextLoseCredentialsAndNamedValues(): void
    {
        $r = Redaction::fromConfig();
        $this->assertSame(
            "cURL error 7 for https://[redacted]@api.example.com/v1?access_token=[redacted]&amount=5\n"
            . "Authorization: [redacted]\nCookie: [redacted]\n{\"error\":\"denied\",\"client_secret\":\"[redacted]\"}\n"
            . "#0 /app/Http.php(12): send('https://[redacted]...', Array)",
            $r->text("cURL error 7 for https://ops:s3cr3t@api.example.com/v1?access_token=XYZ&amount=5\n"
                . "Authorization: Bearer abc.def\nCookie: laravel_session=s3ss; theme=dark\n{\"error\":\"denied\",\"client_secret\":\"cs\"}\n"
                . "#0 /app/Http.php(12): send('https://ops:s3c...', Array)")
        );
        $cases = [
            'request failed: Bearer abc.def was refused' => 'request failed: Bearer [redacted] was refused',
            'Authorization: Basic dXNlcjpwYXNz' => 'Authorization: [redacted]',
            'Basic information about token expiry' => 'Basic information about token expiry',
            'php artisan backup --password=hunter2 --disk=s3' => 'php artisan backup --password=[redacted] --disk=s3',
            "Array\n(\n    [api_key] => abc123\n    [name] => x\n)" => "Array\n(\n    [api_key] => [redacted]\n    [name] => x\n)",
            "['password' => 'pw1', 'user' => 'ada']" => "['password' => '[redacted]', 'user' => 'ada']",
            'X-Api-Key: key123' => 'X-Api-Key: [redacted]',
            '{"data":"{\"apiToken\":\"zzz\"}"}' => '{"data":"{\"apiToken\":\"[redacted]\"}"}',
            'DB_PASSWORD=secretpw APP_ENV=prod' => 'DB_PASSWORD=[redacted] APP_ENV=prod',
            'user[password]=pw2&user[name]=n' => 'user[password]=[redacted]&user[name]=n',
            'time: 12:30:45, note: fine' => 'time: 12:30:45, note: fine',
            'Request: POST /v1 token: abc123 sent' => 'Request: POST /v1 token: [redacted] sent',
        ];
        foreach ($cases as $text => $shown) {
            $this->assertSame($shown, $r->text($text), $text);
        }
    }

    public function testWhatTheRulesCouldNotScanIsNotShown(): void
    {
        $limit = ini_get('pcre.backtrack_limit');
        ini_set('pcre.backtrack_limit', '1');
        try {
            $this->assertSame(Redaction::UNSCANNED, Redaction::fromConfig()->text(str_repeat('"password": "x", ', 50)));
        } finally {
            ini_set('pcre.backtrack_limit', (string) $limit);
        }
        $this->assertSame(Redaction::OPAQUE, Redaction::fromConfig()->show(null, 'not json O:8:"stdClass":0:{}'));
    }

    public function testARowIsHandedToAPageRedactedAndAListsRowWithoutItsPayload(): void
    {
        $payload = (string) json_encode(['displayName' => 'X', 'token' => 't0p', 'data' => ['command' => serialize(['password' => 'pw'])]]);
        $row = (object) ['payload' => $payload, 'exception' => "RuntimeException: Bearer abc.def\n#0 trace"];
        $listed = Redaction::fromConfig()->row(clone $row);
        $this->assertFalse(property_exists($listed, 'payload'), 'a list hands no payload to its view');
        $this->assertSame('RuntimeException: Bearer [redacted]', $listed->exception_first_line);
        $page = Redaction::fromConfig()->row(clone $row, true);
        $this->assertStringNotContainsString('t0p', $page->payload);
        $this->assertStringNotContainsString('"pw"', $page->payload);
        $this->assertSame(Redaction::MARK, $page->payload_array['token']);
    }

    public function testASearchKeptInTheAuditTrailWithholdsItsFreeText(): void
    {
        $query = ['state' => 'failed', 'queue' => 'mail', 'text' => 'sk_live_1', 'exception' => 'Bearer x'];
        $this->assertSame(['state' => 'failed', 'queue' => 'mail', 'text' => Redaction::WITHHELD, 'exception' => Redaction::WITHHELD], Redaction::search($query));
        $this->assertSame(['text' => 'sk_live_1', 'exception' => 'Bearer x'], Redaction::withheld($query));
        $this->assertSame(['state' => 'pending'], Redaction::search(['state' => 'pending']));
    }

    public function testTimesReadAsPeopleSayThem(): void
    {
        $now = new \DateTimeImmutable('2026-12-07 12:00:00');
        $this->assertSame('just now', HumanTime::relative($now->modify('-3 seconds'), $now));
        $this->assertSame('42 s ago', HumanTime::relative($now->modify('-42 seconds'), $now));
        $this->assertSame('3 min ago', HumanTime::relative($now->modify('-200 seconds'), $now));
        $this->assertSame('in 2 h', HumanTime::relative($now->modify('+2 hours +5 minutes'), $now));
        $this->assertSame('3 d ago', HumanTime::relative($now->modify('-3 days'), $now));
    }
}

final class RedactionFixture
{
    public array $nested;

    protected string $password;

    private string $token;

    public function __construct(string $password, array $nested, string $token)
    {
        $this->password = $password;
        $this->nested = ['customer' => (object) $nested, 'list' => [1, 2.5, true, null]];
        $this->token = $token;
    }
}

final class ChainFixture
{
    public array $chained = [];
}

enum RedactionKind
{
    case Card;
}
