<?php

namespace Drover\Dashboard\Redaction;

use Drover\Dashboard\Redaction;

/**
 * A search's free-text filters (`text`, `exception`: a match could reveal a redacted value, and
 * the text itself may be a secret the operator looked for) as the audit trail keeps them —
 * "[withheld]" — and what a bulk action carries to its background job instead.
 */
final class WithheldFilters
{
    /**
     * A search's query as the audit trail keeps and shows it: its free-text filters (text,
     * exception) replaced by WITHHELD.
     *
     * @param array<string, mixed> $query
     * @return array<string, mixed>
     */
    public static function kept(array $query): array
    {
        foreach (Redaction::WITHHELD_FILTERS as $name) {
            if (isset($query[$name]) && $query[$name] !== '') {
                $query[$name] = Redaction::WITHHELD;
            }
        }
        return $query;
    }

    /**
     * The free-text filters of a search, which the audit trail does not keep: what a bulk
     * action carries to its background job instead.
     *
     * @param array<string, mixed> $query
     * @return array<string, string>
     */
    public static function withheld(array $query): array
    {
        $withheld = [];
        foreach (Redaction::WITHHELD_FILTERS as $name) {
            if (isset($query[$name]) && is_string($query[$name]) && $query[$name] !== '') {
                $withheld[$name] = $query[$name];
            }
        }
        return $withheld;
    }
}
