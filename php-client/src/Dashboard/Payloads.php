<?php

namespace Drover\Dashboard;

/**
 * A job's payload as the dashboard shows it: decoded, with its class and tags, and handed to the
 * views only through Redaction::row() (a list's rows carry no payload at all; a job's page the
 * payload redacted); and the search by tag, as a condition on the payload text and an exact
 * filter after.
 */
final class Payloads
{
    /**
     * Payloads that hold the tag as a JSON string, in either of the encodings Laravel writes
     * (unescaped Unicode when pushed, `\uXXXX` after `queue:retry` re-encodes it): a condition
     * and its bindings. The rows are then kept only if their decoded `tags` hold it exactly
     * (onlyTagged). No jsonb cast: a payload that is not JSON must not fail the page.
     *
     * @return array{0: string, 1: list<string>}
     */
    public static function tagged(string $tag): array
    {
        return [
            '(strpos(payload, ?) > 0 OR strpos(payload, ?) > 0)',
            [(string) json_encode($tag, JSON_UNESCAPED_UNICODE), (string) json_encode($tag)],
        ];
    }

    /** @param list<object> $rows @return list<object> */
    public static function onlyTagged(array $rows, ?string $tag): array
    {
        if ($tag === null || $tag === '') {
            return $rows;
        }
        return array_values(array_filter($rows, fn ($row) => in_array($tag, $row->tags, true)));
    }

    /**
     * A decoded payload's tags: only scalar ones, as strings (another producer may write anything
     * under `tags`).
     *
     * @return list<string>
     */
    public static function tagsOf(?array $payload): array
    {
        $tags = $payload['tags'] ?? null;
        if (!is_array($tags)) {
            return [];
        }
        return array_values(array_map('strval', array_filter($tags, 'is_scalar')));
    }

    /**
     * The row as a page may show it: its class (`display_name`) and tags read from the payload,
     * then Redaction::row() — with $page, `payload` becomes the payload as shown (redacted,
     * pretty) and `payload_array` its redacted decoding; without (a list), both are removed.
     */
    public static function decode(object $row, bool $page = false): object
    {
        $decoded = json_decode($row->payload ?? '', true);
        $decoded = is_array($decoded) ? $decoded : null;
        $row->display_name = $row->class ?? (is_string($decoded['displayName'] ?? null) ? $decoded['displayName'] : '');
        $row->tags = self::tagsOf($decoded);
        return Redaction::fromConfig()->row($row, $page);
    }
}
