<?php

namespace Drover\Http\Middleware;

use Closure;

/**
 * The dashboard's searches and actions take text: a query parameter or form field that is not one
 * string of UTF-8 without a NUL byte — bytes PostgreSQL refuses in a text value, or `?tag[]=`
 * where one value is meant — is answered 400 naming it, before any page hands it to a query (where
 * it would be a database error, a 500). Quotes, wildcards, markup and other control characters are
 * text like any other: the repositories bind every value and the views escape it.
 */
class PlainTextInput
{
    public function handle($request, Closure $next)
    {
        foreach (['query parameter' => $request->query->all(), 'form field' => $request->request->all()] as $what => $values) {
            foreach ($values as $name => $value) {
                $problem = self::problem($value);
                if ($problem !== null) {
                    abort(400, "drover: the $what " . self::printable((string) $name) . " $problem");
                }
            }
        }
        return $next($request);
    }

    /** What is wrong with a query parameter's value, or null when it is plain text. */
    public static function problem(mixed $value): ?string
    {
        if ($value === null) {
            return null; // an empty value, as Laravel's ConvertEmptyStringsToNull leaves it
        }
        if (!is_string($value)) {
            return 'must be a single value, not a list';
        }
        if (preg_match('//u', $value) !== 1) {
            return 'is not UTF-8 text';
        }
        if (str_contains($value, "\0")) {
            return 'holds a NUL byte, which no search can match';
        }
        return null;
    }

    /** A parameter's name as an error message may show it. */
    private static function printable(string $name): string
    {
        return '`' . substr((string) preg_replace('/[^\x20-\x7e]/', '?', $name), 0, 64) . '`';
    }
}
