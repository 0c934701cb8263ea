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
