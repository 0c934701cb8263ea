<?php

namespace Drover\Worker;

/** Thrown by a handler to put its job back, to run again after $delaySeconds. */
final class ReleaseJob extends \RuntimeException
{
    public function __construct(public readonly float $delaySeconds = 0.0)
    {
        parent::__construct("release the job for {$delaySeconds}s");
    }
}
