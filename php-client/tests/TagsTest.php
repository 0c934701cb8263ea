<?php

namespace Drover\Tests;

use Drover\Tags;
use Illuminate\Database\Eloquent\Collection;
use Illuminate\Database\Eloquent\Model;
use PHPUnit\Framework\TestCase;

final class TagsUser extends Model
{
}

final class TagsTest extends TestCase
{
    private static function user(int $id): TagsUser
    {
        $user = new TagsUser();
        $user->setAttribute('id', $id);
        return $user;
    }

    public function testAJobsOwnTagsWinAndAreCleaned(): void
    {
        $job = new class {
            public function tags(): array
            {
                return ['customer:42', 'customer:42', "bad\ntag", str_repeat('x', 300), ['not', 'scalar'], ''];
            }
        };
        $tags = Tags::for($job);
        $this->assertSame(['customer:42', 'bad?tag', str_repeat('x', Tags::MAX_LENGTH)], $tags);
    }

    public function testEloquentModelsAmongTheJobsPropertiesAreItsTags(): void
    {
        $job = new class (self::user(7), new Collection([self::user(8), self::user(9)])) {
            public ?string $uninitialized;

            public function __construct(public TagsUser $owner, protected Collection $others)
            {
            }
        };
        $this->assertSame([TagsUser::class . ':7', TagsUser::class . ':8', TagsUser::class . ':9'], Tags::for($job));
    }

    public function testATagsMethodThatThrowsGivesNoTags(): void
    {
        $throws = new class {
            public function tags(): array
            {
                throw new \RuntimeException('no');
            }
        };
        $this->assertSame([], Tags::for($throws));
        $this->assertSame([], Tags::for('not an object'));
    }

    public function testLaravelsWrappersAreLookedIntoAndAJobsOwnTagsAreNotLost(): void
    {
        $mailable = new class extends \Illuminate\Mail\Mailable {
            public ?TagsUser $recipient = null;
        };
        $mailable->recipient = self::user(3);
        $this->assertSame([TagsUser::class . ':3'], Tags::for(new \Illuminate\Mail\SendQueuedMailable($mailable)));
        // A queued listener: its class's tags() with the event.
        $listener = new \Illuminate\Events\CallQueuedListener(TagsListener::class, 'handle', [new TagsEvent(self::user(5))]);
        $this->assertSame(['order:5'], Tags::for($listener));
        // A job with its own tags() and a property named like a wrapper's keeps its own.
        $job = new class {
            public object $notification;

            public function __construct()
            {
                $this->notification = new \stdClass();
            }

            public function tags(): array
            {
                return ['mine'];
            }
        };
        $this->assertSame(['mine'], Tags::for($job));
    }
}

final class TagsEvent
{
    public function __construct(public TagsUser $user)
    {
    }
}

final class TagsListener
{
    public function tags(TagsEvent $event): array
    {
        return ['order:' . $event->user->getKey()];
    }
}
