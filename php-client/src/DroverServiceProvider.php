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
        // Forgetting a failed job that holds an ordered group lets the group go on
        // (docs/ordered-groups.md); the failer is otherwise the application's own.
        $this->app->extend('queue.failer', fn ($failer, $app) => Failed\ReleasingHeldGroups::wrap(
            $failer,
            fn () => $app['db']->connection(Config\Embedded::connectionName($app, $app['config']['drover.database'] ?: null)),
        ));
    }

    public function boot(): void
    {
        $this->app['queue']->addConnector('drover', fn () => new DroverConnector(
            $this->app['db'],
            fn (?string $connection) => Config\Embedded::connectionName($this->app, $connection),
        ));
        // ->droverCatchUp() on a scheduled event (docs/schedule.md).
        Schedule\CatchUp::register();
        $this->app['events']->listen(Events\LongWaitDetected::class, Listeners\SendLongWaitNotification::class);
        $this->app['events']->listen(Events\ScheduledTaskAlert::class, Listeners\SendLongWaitNotification::class);
        // Laravel 11+ pauses a queue by name; every master must see it (docs/laravel-compatibility.md).
        foreach (['Illuminate\Queue\Events\QueuePaused', 'Illuminate\Queue\Events\QueueResumed'] as $event) {
            if (class_exists($event)) {
                $this->app['events']->listen($event, new Listeners\RecordQueuePause($this->app));
            }
        }
        $this->registerDashboard();

        if ($this->app->runningInConsole()) {
            $this->app['events']->listen(CommandStarting::class, new Console\QueueWorkOnDrover($this->app));
            // schedule:run or schedule:work beside the masters that run the schedule: warned of,
            // and what it runs recorded for the masters to say (docs/schedule.md, "Beside cron").
            $this->app['events']->listen(\Illuminate\Console\Events\ScheduledTaskStarting::class, new Listeners\WarnOfASecondScheduler($this->app));
            $recorder = new Listeners\RecordLaravelSchedulerRuns($this->app);
            foreach (['Starting', 'Finished', 'Failed'] as $when) {
                $this->app['events']->listen("Illuminate\\Console\\Events\\ScheduledTask$when", $recorder);
            }
            // `php artisan migrate` after a package upgrade applies drover's new migrations too.
            foreach (['Illuminate\Database\Events\MigrationsEnded', 'Illuminate\Database\Events\NoPendingMigrations'] as $event) {
                $this->app['events']->listen($event, new Listeners\MigrateDroverSchemaAfterMigrate($this->app));
            }
            $this->commands([
                Console\DroverCommand::class,
                Console\InstallCommand::class,
                Console\ImportHorizonCommand::class,
                Console\ImportSupervisorCommand::class,
                Console\WorkCommand::class,
                Console\StatusCommand::class,
                Console\StopJobCommand::class,
                Console\TopCommand::class,
                Console\PauseCommand::class,
                Console\ContinueCommand::class,
                Console\TerminateCommand::class,
                Console\RestartCommand::class,
                Console\LongWaitCommand::class,
                Console\ScheduleExportCommand::class,
                Console\SchedulePauseCommand::class,
                Console\ScheduleResumeCommand::class,
                Console\ScheduleRunNowCommand::class,
                Console\ScheduleRunCommand::class,
            ]);
            // A deploy script written for Horizon still calls horizon:terminate: without Horizon it
            // restarts drover's workers as queue:restart does.
            if (!class_exists(\Laravel\Horizon\Console\TerminateCommand::class)) {
                $this->commands([Console\HorizonTerminateCommand::class]);
            }
            $this->publishes([__DIR__ . '/../config/drover.php' => $this->app->configPath('drover.php')], 'drover-config');
            $this->publishes([__DIR__ . '/../resources/views' => $this->app->resourcePath('views/vendor/drover')], 'drover-views');
            $this->publishes([__DIR__ . '/../database/migrations' => $this->app->databasePath('migrations')], 'drover-migrations');
        }
    }

    /**
     * The dashboard at drover.dashboard.path (default `drover`), on drover.dashboard.domain, behind
     * drover.dashboard.middleware (default `web`) and the viewDrover gate (Http\Middleware\Authorize).
     * `drover.dashboard.enabled => false` registers nothing.
     */
    private function registerDashboard(): void
    {
        $this->loadViewsFrom(__DIR__ . '/../resources/views', 'drover');
        $dashboard = (array) config('drover.dashboard', []);
        if (!($dashboard['enabled'] ?? true) || !$this->app->bound('router')) {
            return;
        }
        $attributes = [
            'prefix' => trim((string) ($dashboard['path'] ?? 'drover'), '/'),
            'middleware' => array_merge((array) ($dashboard['middleware'] ?? ['web']), [Http\Middleware\Authorize::class, Http\Middleware\PlainTextInput::class]),
        ];
        if (!empty($dashboard['domain'])) {
            $attributes['domain'] = $dashboard['domain'];
        }
        $this->app['router']->group($attributes, function () {
            $this->loadRoutesFrom(__DIR__ . '/../routes/web.php');
        });
        // Names are indexed when the application's route provider refreshes them; an application
        // without one (a console skeleton, Laravel 11+ without withRouting) never does.
        $routes = $this->app['router']->getRoutes();
        $routes->refreshNameLookups();
        $routes->refreshActionLookups();
    }
}
