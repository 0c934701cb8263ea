<?php

namespace App\Jobs;

use Illuminate\Contracts\Queue\ShouldQueueAfterCommit;

/*
 * ShouldQueueAfterCommit (Laravel 10+): queued only when the dispatching transaction commits, with
 * no afterCommit() at the dispatch. Laravel 8 has no such interface: there the class asks the same
 * with its $afterCommit property, which every Laravel reads; matrix:dispatch journals which.
 */
if (interface_exists(ShouldQueueAfterCommit::class)) {
    class AfterCommitInterfaceJob extends MatrixJob implements ShouldQueueAfterCommit
    {
        public const HOW = 'uses_should_queue_after_commit';

        protected function run(int $attempt): void
        {
        }
    }
} else {
    class AfterCommitInterfaceJob extends MatrixJob
    {
        public const HOW = 'should_queue_after_commit_absent_on_this_laravel_uses_after_commit_property';

        public function __construct(string $label)
        {
            parent::__construct($label);
            $this->afterCommit = true;
        }

        protected function run(int $attempt): void
        {
        }
    }
}
