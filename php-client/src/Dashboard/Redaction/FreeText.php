<?php

namespace Drover\Dashboard\Redaction;

use Drover\Dashboard\Redaction;

/**
 * Free text as the console may show it — an exception and its trace, a job's note, a task's
 * output, an action's outcome, any string value of a payload: credentials in URLs (userinfo, and
 * query parameters whose names match), `Bearer` and `Basic` credentials, and the values of named
 * fields in the forms text carries them in (`name=value`, `name: value`, `"name": value`,
 * `'name' => value`, `[name] => value`, serialized pairs). A text the regular expression engine
 * gives up on is not shown.
 */
final class FreeText
{
    public function __construct(private Names $names)
    {
    }

    /**
     * Text as a page may show it (an exception and its trace, a note, an output, an outcome, a
     * string value): credentials in URLs, Bearer and Basic credentials, and the values of named
     * fields in the forms text carries them in. Nothing of a text the rules could not be run on.
     */
    public function redact(string $text): string
    {
        if ($text === '') {
            return $text;
        }
        $mark = Redaction::MARK;
        $quoted = '"(?:[^"\\\\]|\\\\.)*+"|\'(?:[^\'\\\\]|\\\\.)*+\'';
        $steps = [
            // Authorization credentials, wherever they are.
            fn (string $t) => preg_replace('/\b(Bearer)\s+[A-Za-z0-9\-._~+\/]++=*+/', '$1 ' . $mark, $t),
            // Basic: base64 (a digit, +, / or =, or mixed case: not a word of prose).
            fn (string $t) => preg_replace('/\b(Basic)\s+(?=[A-Za-z0-9+\/]*+=|[A-Za-z]*+[0-9+\/]|[a-z]++[A-Z]|[A-Z][a-z]*+[A-Z])[A-Za-z0-9+\/]{8,}+=*+/', '$1 ' . $mark, $t),
            // A URL's userinfo (scheme://user:password@host), and one a stack trace cut short
            // ('https://user:pa...').
            fn (string $t) => preg_replace('~\b([a-z][a-z0-9+.\-]*+://)[^\s/?#@\'"<>]++@~i', '$1' . $mark . '@', $t),
            fn (string $t) => preg_replace('~\b([a-z][a-z0-9+.\-]*+://)[^\s/?#@\'"<>:]*+:[^\s/?#@\'"<>]*?\.\.\.(?=\')~i', '$1' . $mark . '...', $t),
            // JSON: "name": value (a string, an array of strings, or a bare value).
            fn (string $t) => $this->each(
                '/"([^"\\\\\r\n]{1,100}+)"\s*+:\s*+(' . $quoted . '|\[(?:[^\]"]|"(?:[^"\\\\]|\\\\.)*+")*+\]|[^,}\]\s]++)/',
                $t,
                [1],
                fn () => '"' . $mark . '"',
            ),
            // The same escaped inside a JSON string: \"name\":\"value\".
            fn (string $t) => $this->each(
                '/\\\\"([^"\\\\\r\n]{1,100}+)\\\\"\s*+:\s*+(\\\\"(?:(?!\\\\")[^\r\n])*+\\\\"|[^,}\]\s\\\\]++)/',
                $t,
                [1],
                fn () => '\\"' . $mark . '\\"',
            ),
            // PHP: 'name' => value (var_export, code), [name] => value (print_r: to the line's end).
            fn (string $t) => $this->each('/[\'"]([^\'"\r\n]{1,100}+)[\'"]\s*+=>\s*+(' . $quoted . '|[^\r\n,)\]]*+)/', $t, [1], fn () => "'" . $mark . "'"),
            fn (string $t) => $this->each('/\[([^\]\r\n]{1,100}+)\]\s*+=>\s*+([^\r\n]*+)/', $t, [1], fn () => $mark),
            // name=value: a query string, a form body, --option=value, NAME=value, name[sub]=value.
            fn (string $t) => $this->each(
                '/(?<![\w\[\]%])(([A-Za-z_][\w\-.]{0,99}+)(?:\[([\w\-]{0,100}+)\])?+(?:\[[\w\-]{0,100}+\])*+)\s*+=(?!>)\s*+(' . $quoted . '|[^\s&#,;\'"<>()\[\]{}]*+)/',
                $t,
                [1, 2, 3],
                fn () => $mark,
            ),
            // name: value — a header (Authorization, Cookie, X-Api-Key: to the line's end), or a
            // named field in prose or YAML (its first word).
            fn (string $t) => $this->each(
                '/(?<![\w\-"\'\\\\])([A-Za-z][\w\-]{0,99}+)[ \t]*+:[ \t]*+(?!\/\/)((?=[^\s])[^\r\n"\']*+)/',
                $t,
                [1],
                fn (array $m) => str_contains($m[1][0], '-') || in_array(strtolower($m[1][0]), ['authorization', 'cookie'], true)
                    ? $mark
                    : (string) preg_replace('/^[^\s,;]++/', $mark, $m[2][0]),
            ),
            // Serialized pairs in text that could not be read as a whole: name";s:N:"value";
            fn (string $t) => $this->each(
                '/s:\d++:"([^"]{1,100}+)";(s:\d++:"[^"]*+";|[idb]:[^;]{0,40}+;)/',
                $t,
                [1],
                fn () => SerializedValue::string($mark),
            ),
        ];
        foreach ($steps as $step) {
            $text = $step($text);
            if (!is_string($text)) {
                // The engine gave up (its backtracking or recursion limit): show nothing of it.
                return Redaction::UNSCANNED;
            }
        }
        return $text;
    }

    /**
     * Each match of $pattern in $text, left to right: where one of the groups $names holds a
     * name that matches, its last group (the value) is replaced by $value(the match's groups);
     * where none does, the scan goes on right after the name, so that a value is scanned in turn
     * (a header's line may hold another). Null when the engine gives up.
     *
     * @param list<int> $names
     * @param callable(array): string $value
     */
    private function each(string $pattern, string $text, array $names, callable $value): ?string
    {
        $out = '';
        $at = 0;
        while (true) {
            $found = preg_match($pattern, $text, $m, PREG_OFFSET_CAPTURE, $at);
            if ($found === false) {
                return null;
            }
            if ($found === 0) {
                return $out . substr($text, $at);
            }
            $last = count($m) - 1;
            [$whole, $start] = $m[0];
            $valueAt = $m[$last][1];
            $named = false;
            foreach ($names as $group) {
                if (isset($m[$group]) && $m[$group][1] >= 0 && $m[$group][0] !== '' && $this->names->named($m[$group][0])) {
                    $named = true;
                    break;
                }
            }
            if ($named && $valueAt >= 0) {
                $out .= substr($text, $at, $valueAt - $at) . $value($m);
                $at = $start + strlen($whole);
            } else {
                // Past the name only; never stuck on an empty match.
                $next = max($valueAt >= 0 ? $valueAt : $start + strlen($whole), $start + 1);
                $out .= substr($text, $at, $next - $at);
                $at = $next;
            }
            if ($at >= strlen($text)) {
                return $out;
            }
        }
    }
}
