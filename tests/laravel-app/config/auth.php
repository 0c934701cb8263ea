<?php

// A session guard over a users table the fixture never fills: the dashboard's gate sees every
// visitor as a guest (a guest is never looked up).
return [
    'defaults' => ['guard' => 'web', 'passwords' => 'users'],
    'guards' => ['web' => ['driver' => 'session', 'provider' => 'users']],
    'providers' => ['users' => ['driver' => 'database', 'table' => 'users']],
];
