#include <curt/execution/access_policy.hpp>  // a kept public path
