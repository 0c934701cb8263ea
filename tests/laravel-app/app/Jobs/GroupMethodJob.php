<?php

namespace App\Jobs;

/** A GroupJob whose group comes from a messageGroup() method instead of the property. */
class GroupMethodJob extends GroupJob
{
    public function __construct(public ?string $methodGroup, string $label, string $mode = 'ok')
    {
        parent::__construct(null, $label, $mode);
    }

    public function messageGroup(): string
    {
        return $this->methodGroup;
    }
}
