// curt/curt.hpp: the whole library. Each header can also be included alone.
#pragma once

#include <curt/detail/config.hpp>
#include <curt/error.hpp>
#include <curt/device.hpp>
#include <curt/access_policy.hpp>
#include <curt/event.hpp>
#include <curt/stream.hpp>
#include <curt/launch.hpp>
#include <curt/occupancy.hpp>
