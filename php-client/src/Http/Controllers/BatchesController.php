<?php

namespace Drover\Http\Controllers;

use Drover\Dashboard\Actions\ActionLog;
use Drover\Dashboard\Actions\Actor;
use Drover\Dashboard\DashboardDatabase;
use Illuminate\Bus\BatchRepository;
use Illuminate\Http\Request;
use Illuminate\Routing\Controller;
use Illuminate\Support\Facades\Artisan;

/**
 * One batch (Laravel's batch repository, `job_batches`): its counts, its failed jobs by id (each
 * a link to its failed page), its jobs still waiting (a search by batch id), and two actions for
 * those the operateDrover gate allows — Cancel (`Batch::cancel()`: jobs using
 * SkipIfBatchCancelled skip themselves) and Retry failed (`queue:retry-batch`).
 */
class BatchesController extends Controller
{
    private function find(string $id): object
    {
        abort_unless(preg_match('/^[0-9a-fA-F-]{36}$/', $id) === 1, 404, 'drover: a batch id is a uuid');
        $batch = app(BatchRepository::class)->find($id);
        abort_if($batch === null, 404, "drover: batch $id is not in the batch repository (it may have been pruned)");
        return $batch;
    }

    public function show(string $id)
    {
        $batch = $this->find($id);
        return view('drover::batch', ['batch' => $batch]);
    }

    public function cancel(Request $request, string $id)
    {
        $batch = $this->find($id);
        $batch->cancel();
        (new ActionLog(DashboardDatabase::connection()))->done(Actor::of($request), 'cancel-batch', ['batch' => $id], "batch “{$batch->name}” cancelled: its jobs that check for it skip themselves");
        return redirect()->route('drover.batch', $id)->with('drover.flash', "Batch {$batch->name} is cancelled.");
    }

    public function retryFailed(Request $request, string $id)
    {
        $batch = $this->find($id);
        $failed = count($batch->failedJobIds);
        Artisan::call('queue:retry-batch', ['id' => $id]);
        (new ActionLog(DashboardDatabase::connection()))->done(Actor::of($request), 'retry-batch', ['batch' => $id], "$failed failed job(s) of batch “{$batch->name}” pushed back onto their queues", true, $failed);
        return redirect()->route('drover.batch', $id)->with('drover.flash', "$failed failed job(s) of batch {$batch->name} were pushed back onto their queues.");
    }
}
