<?php

namespace Drover\Dashboard;

/**
 * A job's payload as the dashboard shows it: decoded, with its class and tags; and the search by
 * tag, as a condition on the payload text and an exact filter after.
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

    /** The row with its payload decoded (`payload_array`), its class and its tags. */
    public static function decode(object $row): object
    {
        $decoded = json_decode($row->payload ?? '', true);
        $row->payload_array = is_array($decoded) ? $decoded : null;
        $row->display_name = $row->class ?? ($row->payload_array['displayName'] ?? '');
        $row->tags = self::tagsOf($row->payload_array);
        return $row;
    }
}
