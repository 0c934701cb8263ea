<?php

namespace App\Jobs;

use App\Models\Widget;

class MissingModelJob extends MatrixJob
{
    public $deleteWhenMissingModels = true;

    public function __construct(string $label, public Widget $widget)
    {
        parent::__construct($label);
    }

    protected function run(int $attempt): void
    {
    }
}
