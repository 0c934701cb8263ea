<?php

namespace Drover;

use Drover\Connectors\DroverConnector;
use Illuminate\Console\Events\CommandStarting;
use Illuminate\Support\ServiceProvider;

/**
 * Registers the `drover` queue driver, merges config/drover.php and adds the artisan commands.
 * Found by package auto-discovery (composer.json extra.laravel.providers).
 */
class DroverServiceProvider extends ServiceProvider
{
    public function register(): void
    {
        $this->mergeConfigFrom(__DIR__ . '/../config/drover.php', 'drover');
    }

    public function boot(): void
    {
        $this->app['queue']->addConnector('drover', fn () => new DroverConnector($this->app['db']));
        $this->app['events']->listen(Events\LongWaitDetected::class, Listeners\SendLongWaitNotification::class);

        if ($this->app->runningInConsole()) {
            $this->app['events']->listen(CommandStarting::class, new Console\QueueWorkGuard($this->app));
            $this->commands([
                Console\DroverCommand::class,
                Console\InstallCommand::class,
                Console\ImportHorizonCommand::class,
                Console\WorkCommand::class,
                Console\StatusCommand::class,
                Console\PauseCommand::class,
                Console\ContinueCommand::class,
                Console\TerminateCommand::class,
                Console\RestartCommand::class,
                Console\LongWaitCommand::class,
            ]);
            $this->publishes([__DIR__ . '/../config/drover.php' => $this->app->configPath('drover.php')], 'drover-config');
            $this->publishes([__DIR__ . '/../database/migrations' => $this->app->databasePath('migrations')], 'drover-migrations');
        }
    }
}
