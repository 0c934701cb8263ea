<?php

namespace Drover\Dashboard\Search;

/**
 * How a filter finds a job by what its payload says — its class, a tag, a batch, any text —
 * as PostgreSQL conditions on the payload's text with bound values: no jsonb cast, so a payload
 * that is not JSON never fails a search (docs/operations.md, hostile input). Each condition is a
 * cheap `strpos` that narrows, and where the text alone could match elsewhere in the payload, a
 * regular expression that is exact. Laravel writes a payload's JSON either with Unicode unescaped
 * (when pushed) or as `\uXXXX` (after queue:retry re-encodes it); both are matched. Pure.
 */
final class PayloadText
{
    /**
     * The job's class: `displayName` is the class given in full, or ends with it after a
     * namespace separator.
     *
     * @return array{0: string, 1: list<string>}
     */
    public static function class(string $column, string $class): array
    {
        $class = ltrim($class, '\\');
        // json_encode writes a namespace separator as `\\`; a name without one may be the last part
        // of the displayName after one.
        $alternatives = [];
        $bindings = [];
        foreach (self::encodings($class) as $json) {
            $inner = substr($json, 1, -1);
            $bindings[] = $inner . '"';
            $prefix = str_contains($class, '\\') ? '' : '([^"\\\\]|\\\\\\\\)*\\\\\\\\';
            $alternatives[] = self::narrowed($column);
            $bindings[] = '"displayName":"(' . $prefix . ')?' . self::regexQuote($inner) . '"';
        }
        return ['(' . implode(' OR ', $alternatives) . ')', $bindings];
    }

    /**
     * A tag, exactly: one of the strings of the payload's `tags` list.
     *
     * @return array{0: string, 1: list<string>}
     */
    public static function tag(string $column, string $tag): array
    {
        $alternatives = [];
        $bindings = [];
        foreach (self::encodings($tag) as $json) {
            $alternatives[] = self::narrowed($column);
            $bindings[] = $json;
            $bindings[] = '"tags":\[("([^"\\\\]|\\\\.)*",)*' . self::regexQuote($json) . '[],]';
        }
        return ['(' . implode(' OR ', $alternatives) . ')', $bindings];
    }

    /**
     * A `strpos` that narrows, then the regular expression that is exact, in that order: the
     * planner orders the conditions of a WHERE by their cost, and would otherwise run the
     * expression (eight times dearer, measured) on every row. Two bindings: needle, expression.
     */
    private static function narrowed(string $column): string
    {
        return "(CASE WHEN strpos($column, ?) > 0 THEN $column ~ ? ELSE false END)";
    }

    /**
     * Text anywhere in the payload, as given or as JSON writes it inside a string (a quote, a
     * backslash, a slash or a character outside ASCII written escaped).
     *
     * @return array{0: string, 1: list<string>}
     */
    public static function text(string $column, string $text): array
    {
        $needles = [$text];
        foreach (self::encodings($text) as $json) {
            $needles[] = substr($json, 1, -1);
        }
        $needles = array_values(array_unique($needles));
        return [
            '(' . implode(' OR ', array_fill(0, count($needles), "strpos($column, ?) > 0")) . ')',
            $needles,
        ];
    }

    /**
     * The JSON strings Laravel may have written for a value: Unicode and slashes unescaped, and
     * escaped (the two encodings of docs/dashboard.md, "Tags").
     *
     * @return list<string>
     */
    public static function encodings(string $value): array
    {
        return array_values(array_unique(array_filter([
            json_encode($value, JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES),
            json_encode($value, JSON_UNESCAPED_UNICODE),
            json_encode($value),
        ], 'is_string')));
    }

    /** Text as a PostgreSQL (ARE) regular expression that matches it literally. */
    public static function regexQuote(string $text): string
    {
        return (string) preg_replace('/[\\\\.^$|?*+()\[\]{}]/', '\\\\$0', $text);
    }
}
