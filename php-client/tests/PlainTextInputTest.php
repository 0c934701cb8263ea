<?php

namespace Drover\Tests;

use Drover\Http\Middleware\PlainTextInput;
use PHPUnit\Framework\TestCase;

/** What the dashboard refuses of a search or form value before any query sees it. */
final class PlainTextInputTest extends TestCase
{
    public function testTextOfAnyKindIsPlainText(): void
    {
        foreach (['', 'customer:42', "q'\"; DROP TABLE jobs; -- 100%_\\ <script>\t\x1b[31m", 'Grüße 🚚'] as $value) {
            $this->assertNull(PlainTextInput::problem($value), $value);
        }
        $this->assertNull(PlainTextInput::problem(null), 'an empty value, after ConvertEmptyStringsToNull');
    }

    public function testWhatNoSearchCanTakeIsNamed(): void
    {
        $this->assertSame('is not UTF-8 text', PlainTextInput::problem("\xff\xfe"));
        $this->assertSame('holds a NUL byte, which no search can match', PlainTextInput::problem("a\0b"));
        $this->assertSame('must be a single value, not a list', PlainTextInput::problem(['x']));
    }
}
