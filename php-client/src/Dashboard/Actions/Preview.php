<?php

namespace Drover\Dashboard\Actions;

/**
 * What the operator saw on a bulk action's confirmation page (docs/dashboard.md, "Acting on all
 * that match"): the search, the verb (and a move's queue), the count, and the point the preview
 * was taken at — the newest key of the state (`upto`), the database's time (`at`) and the oldest
 * transaction still open then (`horizon`, a txid). The action acts only on what matched at that
 * point (Previewed says how a row is known to have): not on a job dispatched, due, released or
 * otherwise changed since.
 *
 * It travels in the confirmation form as a token signed with the application's key (HMAC-SHA256
 * over its JSON), so the POST cannot name another search, bound or count than the page showed;
 * a token older than LIFETIME seconds is refused (preview again). Pure: no database, no request.
 */
final class Preview
{
    /** Seconds a preview may be confirmed within. */
    public const LIFETIME = 3600;

    /** What the signature is over besides the preview, so no other HMAC of the key can pass for one. */
    private const PURPOSE = 'drover.bulk-preview.v1.';

    /**
     * @param array<string, string> $search the search's query (state and filters), as the page read it
     * @param ?int $count what the preview counted (null: nothing in its time)
     * @param bool $exact whether the count is every match, or a lower bound
     * @param int $issued when the preview was shown (Unix time)
     */
    public function __construct(
        public readonly array $search,
        public readonly string $verb,
        public readonly ?string $to,
        public readonly string $upto,
        public readonly string $at,
        public readonly string $horizon,
        public readonly ?int $count,
        public readonly bool $exact,
        public readonly int $issued,
    ) {
    }

    /** The token the confirmation form carries. */
    public function token(string $key): string
    {
        $body = rtrim(strtr(base64_encode((string) json_encode([
            'search' => $this->search,
            'verb' => $this->verb,
            'to' => $this->to,
            'upto' => $this->upto,
            'at' => $this->at,
            'horizon' => $this->horizon,
            'count' => $this->count,
            'exact' => $this->exact,
            'issued' => $this->issued,
        ], JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE)), '+/', '-_'), '=');
        return $body . '.' . hash_hmac('sha256', self::PURPOSE . $body, $key);
    }

    /**
     * The preview a token carries.
     *
     * @throws \InvalidArgumentException saying what is wrong with it (altered, malformed, expired)
     */
    public static function fromToken(string $token, string $key, int $now): self
    {
        $parts = explode('.', $token);
        if (count($parts) !== 2 || !hash_equals(hash_hmac('sha256', self::PURPOSE . $parts[0], $key), $parts[1])) {
            throw new \InvalidArgumentException('is not a preview this application signed (altered, or from another application): preview the action again from the search');
        }
        $fields = json_decode((string) base64_decode(strtr($parts[0], '-_', '+/'), true), true);
        $valid = is_array($fields)
            && is_array($fields['search'] ?? null)
            && is_string($fields['verb'] ?? null)
            && (($fields['to'] ?? null) === null || is_string($fields['to']))
            && is_string($fields['upto'] ?? null) && ctype_digit($fields['upto'])
            && is_string($fields['at'] ?? null)
            && is_string($fields['horizon'] ?? null) && ctype_digit($fields['horizon'])
            && (($fields['count'] ?? null) === null || is_int($fields['count']))
            && is_bool($fields['exact'] ?? null)
            && is_int($fields['issued'] ?? null);
        if (!$valid) {
            throw new \InvalidArgumentException('is signed but not a preview of this drover (an older one?): preview the action again from the search');
        }
        if ($now - $fields['issued'] > self::LIFETIME) {
            throw new \InvalidArgumentException('is older than ' . intdiv(self::LIFETIME, 60) . ' minutes: preview the action again from the search, for what matches now');
        }
        return new self($fields['search'], $fields['verb'], $fields['to'], $fields['upto'], $fields['at'], $fields['horizon'], $fields['count'], $fields['exact'], $fields['issued']);
    }

    /**
     * The key previews are signed with: the application's (config app.key, `base64:` decoded).
     *
     * @throws \RuntimeException when the application has none
     */
    public static function key(): string
    {
        $key = (string) config('app.key');
        if (str_starts_with($key, 'base64:')) {
            $key = (string) base64_decode(substr($key, 7), true);
        }
        if ($key === '') {
            throw new \RuntimeException('drover: the application has no key (config app.key) to sign a bulk action\'s preview with: set APP_KEY (php artisan key:generate)');
        }
        return $key;
    }

    /**
     * What the action's row keeps of the preview (its target's `preview`): the point it was taken
     * at and what it counted — not the search, whose free-text filters the audit trail withholds.
     *
     * @return array{at: string, horizon: string, count: ?int, exact: bool}
     */
    public function record(): array
    {
        return ['at' => $this->at, 'horizon' => $this->horizon, 'count' => $this->count, 'exact' => $this->exact];
    }
}
