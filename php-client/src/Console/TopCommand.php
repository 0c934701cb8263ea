<?php

namespace Drover\Console;

use Drover\Dashboard\DashboardDatabase;
use Drover\Dashboard\Limits;
use Drover\Dashboard\Repositories\LimitRepository;
use Drover\Dashboard\Repositories\MetricsRepository;
use Drover\Dashboard\Repositories\NodeRepository;
use Drover\Dashboard\Repositories\QueueRepository;
use Illuminate\Console\Command;

/**
 * `php artisan drover:top`: the fleet in a terminal, for those who live in SSH — every master
 * (every host) with its pools and workers, every queue with its counts and its last hour, the
 * busiest limit keys — redrawn every `--every` seconds from the database (the dashboard's
 * connection and reads), so it works from any host of the application.
 */
class TopCommand extends Command
{
    protected $signature = 'drover:top
        {--every=2 : Seconds between frames}
        {--once : Print one frame and exit}';

    protected $description = 'Watch every drover master, queue and limit key, live, in the terminal';

    public function handle(): int
    {
        $every = (float) $this->option('every');
        if (!is_finite($every) || $every < 0.2) {
            $this->error("drover: --every must be a number of seconds, 0.2 or more, got {$this->option('every')}");
            return 1;
        }
        do {
            $lines = $this->frame();
            if (!$this->option('once')) {
                $this->output->write("\033[H\033[2J");
            }
            foreach ($lines as $line) {
                $this->line($line);
            }
            if ($this->option('once')) {
                return 0;
            }
            usleep((int) ($every * 1_000_000));
        } while (true);
    }

    /** @return list<string> */
    private function frame(): array
    {
        $db = DashboardDatabase::connection();
        $nodes = (new NodeRepository($db))->nodes();
        $served = [];
        foreach ($nodes as $node) {
            foreach ($node->status['pools'] ?? [] as $pool) {
                array_push($served, ...array_map('strval', $pool['queues'] ?? []));
            }
        }
        $throughput = [];
        foreach ((new MetricsRepository($db))->throughput('queue') as $row) {
            $throughput[(string) $row->name] = $row;
        }
        return TopScreen::lines(
            $nodes,
            (new QueueRepository($db))->queues(array_values(array_unique($served)), Limits::OVERVIEW_COUNT_CAP),
            $throughput,
            (new LimitRepository($db))->keys(),
            Limits::OVERVIEW_COUNT_CAP,
            gmdate('Y-m-d H:i:s') . ' UTC',
        );
    }
}
