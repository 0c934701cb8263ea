<?php

namespace Drover\Failed;

use Illuminate\Queue\Failed\PrunableFailedJobProvider;

/**
 * ReleasingHeldGroups around a failer that can prune (`queue:prune-failed` asks with instanceof):
 * pruning lets go of the groups held by the jobs it deletes.
 */
class PrunableReleasingHeldGroups extends ReleasingHeldGroups implements PrunableFailedJobProvider
{
    public function prune(\DateTimeInterface $before)
    {
        $held = array_map(
            fn ($row) => (string) $row->held_uuid,
            $this->withoutSchema(fn () => $this->db()->select(
                'SELECT DISTINCT held_uuid FROM drover.groups WHERE head IS NULL AND held_uuid IS NOT NULL AND held_at < ?',
                [$before->format(\DateTimeInterface::ATOM)],
            )) ?? [],
        );
        $pruned = $this->failer->prune($before);
        foreach ($held as $uuid) {
            $this->letGo($uuid);
        }
        return $pruned;
    }
}
