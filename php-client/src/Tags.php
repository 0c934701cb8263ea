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
        $target = $job;
        // Queued listeners, mailables and notifications wrap the object that carries the tags.
        foreach (['listener', 'mailable', 'notification'] as $inner) {
            if (isset($job->{$inner}) && is_object($job->{$inner})) {
                $target = $job->{$inner};
            }
        }
        if (method_exists($target, 'tags')) {
            try {
                $tags = (array) $target->tags();
            } catch (\Throwable) {
                $tags = [];
            }
        } else {
            $tags = self::modelTags($target);
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
