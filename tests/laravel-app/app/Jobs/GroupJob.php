<?php

namespace App\Jobs;

use App\Support\Journal;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

/**
 * A job of an ordered group (tests/groups.rs): journals `group_start` and `group_end` around 15 ms
 * of work, labelled `<group>:<seq>`, so the test can check order and overlap per group. Its group
 * is the `$messageGroup` property (declared as Laravel 12's Queueable declares it, so the same
 * class works on Laravel 8, which has no such property), set from the constructor; null leaves it
 * to onGroup() (Laravel 12) or a subclass's messageGroup().
 *
 * Modes: `ok`; `release_once` (released on its first attempt); `throw_once` (throws on its first
 * attempt, tries 3); `fail_once` (fails for good on its first run, holding its group, and succeeds
 * when retried); `fail` (fails for good, the group goes on); `slow` (8 s of work); `timeout_once`
 * (a 1 s timeout that its first attempt outruns: the master kills its worker, Laravel retries it).
 */
class GroupJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels;

    public $messageGroup;

    public $tries = 3;

    public $backoff = 0;

    public $holdGroupOnFailure = false;

    public function __construct(public ?string $group, public string $label, public string $mode = 'ok')
    {
        $this->messageGroup = $group;
        $this->holdGroupOnFailure = $mode === 'fail_once';
        if ($mode === 'timeout_once') {
            $this->timeout = 1;
        }
    }

    public function handle(): void
    {
        Journal::record($this->label, 'group_start', $this->attempts());
        $first = $this->attempts() === 1;
        usleep(match (true) {
            $this->mode === 'slow' => 8_000_000,
            $this->mode === 'timeout_once' && $first => 5_000_000,
            default => 15_000,
        });
        Journal::record($this->label, 'group_end', $this->attempts());
        if ($this->mode === 'release_once' && $first) {
            $this->release(0);
        } elseif ($this->mode === 'throw_once' && $first) {
            throw new \RuntimeException("{$this->label} throws once");
        } elseif ($this->mode === 'fail') {
            $this->fail(new \RuntimeException("{$this->label} fails"));
        } elseif ($this->mode === 'fail_once'
            && \DB::table('journal')->where('label', $this->label)->where('event', 'group_start')->count() === 1) {
            $this->fail(new \RuntimeException("{$this->label} fails until retried"));
        }
    }
}
