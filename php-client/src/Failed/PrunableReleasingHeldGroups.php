<?php

namespace Drover\Failed;

use Illuminate\Queue\Failed\PrunableFailedJobProvider;

/**
 * ReleasingHeldGroups around a failer that can prune (`queue:prune-failed` asks with instanceof):
 * pruning lets go of the groups held by the jobs it deleted.
 */
class PrunableReleasingHeldGroups extends ReleasingHeldGroups implements PrunableFailedJobProvider
{
    public function prune(\DateTimeInterface $before)
    {
        $held = $this->heldByFailedJobs();
        $pruned = $this->failer->prune($before);
        $this->releaseGroupsOfDeleted($held);
        return $pruned;
    }
}
