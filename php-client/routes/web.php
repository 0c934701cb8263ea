<?php

use Drover\Http\Controllers\ActionsController;
use Drover\Http\Controllers\BatchesController;
use Drover\Http\Controllers\DashboardController;
use Drover\Http\Controllers\FailedJobsController;
use Drover\Http\Controllers\GroupsController;
use Drover\Http\Controllers\LimitsController;
use Drover\Http\Controllers\MastersController;
use Drover\Http\Controllers\QueuesController;
use Drover\Http\Controllers\ScheduleController;
use Drover\Http\Controllers\SearchController;
use Drover\Http\Controllers\StopController;
use Drover\Http\Controllers\WorkflowsController;
use Drover\Http\Middleware\AuthorizeOperate;
use Illuminate\Support\Facades\Route;

// The dashboard, under drover.dashboard.path (default /drover), registered by
// DroverServiceProvider with drover.dashboard.middleware and the viewDrover gate. Every action
// (each POST, and the confirmation page that leads to one) is behind the operateDrover gate too.
Route::get('/', [DashboardController::class, 'overview'])->name('drover.overview');
Route::get('/jobs/{kind}', [DashboardController::class, 'jobs'])->where('kind', 'pending|delayed|running')->name('drover.jobs');
Route::get('/job/{id}', [DashboardController::class, 'job'])->where('id', '[0-9]{1,18}')->name('drover.job');
Route::get('/completed', [DashboardController::class, 'completed'])->name('drover.completed');
Route::get('/completed/{id}/{attempt}', [DashboardController::class, 'completedJob'])->where(['id' => '[0-9]{1,18}', 'attempt' => '[0-9]{1,9}'])->name('drover.completed-job');
Route::get('/failed', [FailedJobsController::class, 'index'])->name('drover.failed');
Route::get('/failed/{id}', [FailedJobsController::class, 'show'])->name('drover.failed-job');
Route::post('/failed/{id}/retry', [FailedJobsController::class, 'retry'])->name('drover.failed.retry')->middleware(AuthorizeOperate::class);
Route::post('/failed/{id}/forget', [FailedJobsController::class, 'forget'])->name('drover.failed.forget')->middleware(AuthorizeOperate::class);
Route::get('/class', [DashboardController::class, 'jobClass'])->name('drover.class');
Route::get('/batches', [DashboardController::class, 'batches'])->name('drover.batches');
Route::get('/groups', [GroupsController::class, 'index'])->name('drover.groups');
Route::get('/limits', [LimitsController::class, 'index'])->name('drover.limits');
Route::get('/group', [GroupsController::class, 'show'])->name('drover.group');
Route::get('/tags', [DashboardController::class, 'tags'])->name('drover.tags');
Route::get('/schedule', [ScheduleController::class, 'index'])->name('drover.schedule');
Route::post('/schedule/run-now', [ScheduleController::class, 'runNow'])->name('drover.schedule.run-now')->middleware(AuthorizeOperate::class);
Route::post('/schedule/pause', [ScheduleController::class, 'pause'])->name('drover.schedule.pause')->middleware(AuthorizeOperate::class);
Route::post('/schedule/resume', [ScheduleController::class, 'resume'])->name('drover.schedule.resume')->middleware(AuthorizeOperate::class);
Route::get('/search', [SearchController::class, 'index'])->name('drover.search');
Route::get('/actions', [ActionsController::class, 'index'])->name('drover.actions');
Route::get('/actions/confirm', [ActionsController::class, 'confirm'])->name('drover.actions.confirm')->middleware(AuthorizeOperate::class);
Route::post('/actions', [ActionsController::class, 'store'])->name('drover.actions.store')->middleware(AuthorizeOperate::class);
Route::get('/actions/{id}', [ActionsController::class, 'show'])->where('id', '[0-9]{1,18}')->name('drover.action');
Route::post('/queues/pause', [QueuesController::class, 'pause'])->name('drover.queues.pause')->middleware(AuthorizeOperate::class);
Route::post('/queues/resume', [QueuesController::class, 'resume'])->name('drover.queues.resume')->middleware(AuthorizeOperate::class);
Route::post('/job/{id}/stop', [StopController::class, 'stop'])->where('id', '[0-9]{1,18}')->name('drover.job.stop')->middleware(AuthorizeOperate::class);
Route::get('/queue', [DashboardController::class, 'queue'])->name('drover.queue');
Route::get('/batch/{id}', [BatchesController::class, 'show'])->name('drover.batch');
Route::post('/batch/{id}/cancel', [BatchesController::class, 'cancel'])->name('drover.batch.cancel')->middleware(AuthorizeOperate::class);
Route::post('/batch/{id}/retry', [BatchesController::class, 'retryFailed'])->name('drover.batch.retry')->middleware(AuthorizeOperate::class);
Route::post('/masters/{node}/restart', [MastersController::class, 'restart'])->where('node', '[0-9]{1,18}')->name('drover.masters.restart')->middleware(AuthorizeOperate::class);
Route::post('/masters/{node}/pools', [MastersController::class, 'poolSize'])->where('node', '[0-9]{1,18}')->name('drover.masters.pool-size')->middleware(AuthorizeOperate::class);
Route::get('/workflows', [WorkflowsController::class, 'index'])->name('drover.workflows');
Route::get('/workflows/{id}', [WorkflowsController::class, 'show'])->where('id', '[0-9]{1,18}')->name('drover.workflow');
Route::post('/workflows/{id}/cancel', [WorkflowsController::class, 'cancel'])->where('id', '[0-9]{1,18}')->name('drover.workflow.cancel')->middleware(AuthorizeOperate::class);
Route::post('/workflows/{id}/steps/{step}/retry', [WorkflowsController::class, 'retryStep'])->where(['id' => '[0-9]{1,18}', 'step' => '[0-9]{1,18}'])->name('drover.workflow.retry-step')->middleware(AuthorizeOperate::class);
Route::get('/workflows/{id}/signal', [WorkflowsController::class, 'signalForm'])->where('id', '[0-9]{1,18}')->name('drover.workflow.signal-form')->middleware(AuthorizeOperate::class);
Route::post('/workflows/{id}/signal', [WorkflowsController::class, 'signal'])->where('id', '[0-9]{1,18}')->name('drover.workflow.signal')->middleware(AuthorizeOperate::class);
