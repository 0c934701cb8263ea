<?php

namespace Drover\Console;

use Drover\Events\LongWaitDetected;
use Drover\Events\ScheduledTaskAlert;
use Illuminate\Console\Command;

/**
 * `php artisan drover:long-wait --queue=Q --seconds=S`: run by the drover master when a queue's
 * oldest job has waited past its threshold (`waits` in config/drover.php); fires
 * Drover\Events\LongWaitDetected, whose listener sends the notifications.
 */
class LongWaitCommand extends Command
{
    protected $signature = 'drover:long-wait
        {--queue= : The queue}
        {--seconds= : How long its oldest job has waited}
        {--connection= : The queue connection (default: the one `waits` names for the queue, else drover)}
        {--group= : The ordered group whose job waited behind its head, when that is the longest wait}
        {--key= : The limit key a job waited for, when that is the longest wait}
        {--task= : A scheduled task that needs attention (its key), instead of a queue}
        {--summary= : That task as schedule:list shows it}
        {--failures= : Its runs failed since its last success (0: it is overdue)}';

    protected $description = 'Fire LongWaitDetected for a queue, or ScheduledTaskAlert for a task (run by the drover master)';

    public function handle(): int
    {
        $task = (string) $this->option('task');
        if ($task !== '') {
            $failures = $this->option('failures');
            $seconds = $this->option('seconds');
            if (!is_numeric($failures) || (int) $failures < 0 || ($seconds !== null && (!is_numeric($seconds) || (int) $seconds < 0))) {
                $this->error('drover:long-wait --task=KEY needs --failures=N (and --seconds=N since its last success, if it had one)');
                return 1;
            }
            event(new ScheduledTaskAlert(
                $task,
                (string) ($this->option('summary') ?: $task),
                (int) $failures,
                $seconds === null ? null : (int) $seconds,
            ));
            return 0;
        }
        $queue = (string) $this->option('queue');
        $seconds = $this->option('seconds');
        if ($queue === '' || !is_numeric($seconds) || (int) $seconds < 0) {
            $this->error('drover:long-wait needs --queue=NAME and --seconds=N (a whole number of seconds)');
            return 1;
        }
        $connection = (string) ($this->option('connection') ?: self::connectionFor($queue));
        $group = $this->option('group');
        $key = $this->option('key');
        event(new LongWaitDetected(
            $connection,
            $queue,
            (int) $seconds,
            is_string($group) && $group !== '' ? $group : null,
            is_string($key) && $key !== '' ? $key : null,
        ));
        return 0;
    }

    /** The connection of the first `waits` key for this queue (`connection:queue`), else drover. */
    private static function connectionFor(string $queue): string
    {
        foreach (array_keys((array) config('drover.waits', [])) as $key) {
            $parts = explode(':', (string) $key, 2);
            if (count($parts) === 2 && $parts[1] === $queue) {
                return $parts[0];
            }
        }
        return 'drover';
    }
}
