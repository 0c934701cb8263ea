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

    public function testATagsMethodThatThrowsGivesNoTagsAndAWrappedMailableIsLookedInto(): void
    {
        $throws = new class {
            public function tags(): array
            {
                throw new \RuntimeException('no');
            }
        };
        $this->assertSame([], Tags::for($throws));
        $wrapper = new class (self::user(3)) {
            public object $mailable;

            public function __construct(TagsUser $user)
            {
                $this->mailable = new class ($user) {
                    public function __construct(public TagsUser $to)
                    {
                    }
                };
            }
        };
        $this->assertSame([TagsUser::class . ':3'], Tags::for($wrapper));
        $this->assertSame([], Tags::for('not an object'));
    }
}
