<?php

namespace Drover;

use Illuminate\Database\Eloquent\Collection as EloquentCollection;
use Illuminate\Database\Eloquent\Model;

/**
 * A job's tags, as Horizon finds them: the job's own `tags()` when it has one, else every Eloquent
 * model (or collection of models) among its properties, as `App\Models\User:42`. They are written
 * into the payload (`tags`) when the job is pushed, so the dashboard can search pending, completed
 * and failed jobs alike by tag.
 */
final class Tags
{
    /** The most tags kept per job, and the longest tag. */
    public const MAX_TAGS = 20;
    public const MAX_LENGTH = 200;

    /** @return list<string> */
    public static function for($job): array
    {
        if (!is_object($job)) {
            return [];
        }
        [$target, $arguments] = self::target($job);
        if (method_exists($target, 'tags')) {
            try {
                $tags = (array) $target->tags(...$arguments);
            } catch (\Throwable) {
                $tags = [];
            }
        } else {
            $tags = self::modelTags($target);
            foreach ($arguments as $argument) {
                if ($argument instanceof Model && $argument->getKey() !== null) {
                    $tags[] = get_class($argument) . ':' . $argument->getKey();
                } elseif (is_object($argument)) {
                    $tags = array_merge($tags, self::modelTags($argument));
                }
            }
        }
        $clean = [];
        foreach ($tags as $tag) {
            if (!is_scalar($tag)) {
                continue;
            }
            $tag = mb_substr(preg_replace('/[\x00-\x1f\x7f]/u', '?', (string) $tag) ?? '', 0, self::MAX_LENGTH);
            if ($tag !== '' && !in_array($tag, $clean, true)) {
                $clean[] = $tag;
            }
            if (count($clean) >= self::MAX_TAGS) {
                break;
            }
        }
        return $clean;
    }

    /**
     * The object that carries the tags, and what its `tags()` is called with: the job itself when
     * it has `tags()`; else, for Laravel's wrappers, what they wrap — a queued listener (an
     * instance of its class, its `tags()` called with the event), a broadcast event, a queued
     * mailable or notification.
     *
     * @return array{0: object, 1: list<mixed>}
     */
    private static function target(object $job): array
    {
        if (method_exists($job, 'tags')) {
            return [$job, []];
        }
        if ($job instanceof \Illuminate\Events\CallQueuedListener && is_string($job->class) && class_exists($job->class)) {
            try {
                $listener = (new \ReflectionClass($job->class))->newInstanceWithoutConstructor();
                return [$listener, array_values((array) $job->data)];
            } catch (\Throwable) {
                return [$job, []];
            }
        }
        foreach ([
            \Illuminate\Broadcasting\BroadcastEvent::class => 'event',
            \Illuminate\Mail\SendQueuedMailable::class => 'mailable',
            \Illuminate\Notifications\SendQueuedNotifications::class => 'notification',
        ] as $wrapper => $property) {
            if ($job instanceof $wrapper && isset($job->{$property}) && is_object($job->{$property})) {
                return [$job->{$property}, []];
            }
        }
        return [$job, []];
    }

    /** @return list<string> */
    private static function modelTags(object $job): array
    {
        $tags = [];
        foreach ((new \ReflectionObject($job))->getProperties() as $property) {
            if ($property->isStatic()) {
                continue;
            }
            $property->setAccessible(true);
            if (!$property->isInitialized($job)) {
                continue;
            }
            $value = $property->getValue($job);
            $models = $value instanceof EloquentCollection ? $value->all() : [$value];
            foreach ($models as $model) {
                if ($model instanceof Model && $model->getKey() !== null) {
                    $tags[] = get_class($model) . ':' . $model->getKey();
                }
            }
        }
        return $tags;
    }
}
