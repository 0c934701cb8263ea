<?php

namespace Drover\Console;

use Illuminate\Console\Command;

/**
 * `php artisan horizon:terminate` where Horizon is not installed (registered only then): a deploy
 * script written for Horizon — Forge adds this line when its Horizon integration is on — keeps
 * working after the move to drover. It does what `queue:restart` does, which drover's masters
 * answer with a reload: a new zygote from the release the application's path points to now, every
 * worker replaced one by one (docs/deploy.md, "queue:restart and horizon:terminate").
 */
class HorizonTerminateCommand extends Command
{
    protected $signature = 'horizon:terminate {--wait : Accepted as Horizon accepts it; the reload is rolling, nothing to wait for}';

    protected $description = 'Horizon is not installed: restart drover\'s workers on the current release, as queue:restart does';

    public function handle(): int
    {
        $this->line('drover: Horizon is not installed; restarting the workers as queue:restart does (each drover master reloads the release its application path points to, one worker at a time)');
        return $this->call('queue:restart');
    }
}
