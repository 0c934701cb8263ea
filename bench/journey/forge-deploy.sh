#!/usr/bin/env bash
# Laravel Forge's deploy script for a zero-downtime site — the default a new site's "Deployments"
# tab shows — with each macro written out as the commands it runs. bench/src/bin/journey.rs runs it
# on each host for each deploy (docs/guide.md, step 6), as Forge runs it:
#
#   $CREATE_RELEASE()
#   cd $FORGE_RELEASE_DIRECTORY
#   $FORGE_COMPOSER install --no-dev --no-interaction --prefer-dist --optimize-autoloader
#   $FORGE_PHP artisan optimize
#   $FORGE_PHP artisan storage:link
#   $FORGE_PHP artisan migrate --force
#   npm ci || npm install && npm run build
#   $ACTIVATE_RELEASE()
#   $RESTART_QUEUES()
#
# What Forge provides, given by the caller: FORGE_SITE_PATH (the site: releases/, current, the
# shared storage/ and .env), FORGE_SITE_BRANCH, FORGE_PHP, and the repository to clone
# (FORGE_REPOSITORY: here a local git repository, the application's code at the commit to deploy).
# Two lines are left out, and said where they stand: composer install (no network here: the
# repository commits vendor/ as a link to the offline build of tests/laravel12-app/build, which
# composer install would have made) and npm (the application has no front end).
#
# DEPLOY_RESTART_HORIZON=1 adds Horizon's own restart, `php artisan horizon:terminate`, before the
# last line: what $RESTART_QUEUES() runs on a site with Forge's Horizon integration, for a deploy
# while Horizon still runs (a cutover, a rollback; docs/guide.md steps 5 and 11).
set -euo pipefail
: "${FORGE_SITE_PATH:?the site directory}" "${FORGE_REPOSITORY:?the repository to clone}"
FORGE_SITE_BRANCH="${FORGE_SITE_BRANCH:-main}"
FORGE_PHP="${FORGE_PHP:-php}"

# $CREATE_RELEASE(): the branch cloned into a new release directory, the site's shared storage/
# and .env linked into it.
FORGE_RELEASE_DIRECTORY="$FORGE_SITE_PATH/releases/$(date -u +%Y%m%d%H%M%S)"
mkdir -p "$FORGE_SITE_PATH/releases"
git clone --quiet --depth 1 --branch "$FORGE_SITE_BRANCH" "file://$FORGE_REPOSITORY" "$FORGE_RELEASE_DIRECTORY"
rm -rf "$FORGE_RELEASE_DIRECTORY/storage"
ln -s "$FORGE_SITE_PATH/storage" "$FORGE_RELEASE_DIRECTORY/storage"
ln -sfn "$FORGE_SITE_PATH/.env" "$FORGE_RELEASE_DIRECTORY/.env"

cd "$FORGE_RELEASE_DIRECTORY"

# $FORGE_COMPOSER install --no-dev --no-interaction --prefer-dist --optimize-autoloader: vendor/
# comes with the clone (above).
$FORGE_PHP artisan optimize
$FORGE_PHP artisan storage:link
$FORGE_PHP artisan migrate --force
# npm ci || npm install && npm run build: no front end.

# $ACTIVATE_RELEASE()
ln -sfn "$FORGE_RELEASE_DIRECTORY" "$FORGE_SITE_PATH/current"

# $RESTART_QUEUES()
if [ "${DEPLOY_RESTART_HORIZON:-}" = 1 ]; then
    $FORGE_PHP artisan horizon:terminate
fi
$FORGE_PHP artisan queue:restart
