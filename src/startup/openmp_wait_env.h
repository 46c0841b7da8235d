// OpenMP's wait policy for every dllmq command, set before libgomp reads it (see the .cpp).
#pragma once

extern "C" {
// Whether this library's constructor set OMP_WAIT_POLICY and GOMP_SPINCOUNT (false: the user had
// set one of them, and both were left alone).
bool dllmq_openmp_wait_defaults_set();
}
