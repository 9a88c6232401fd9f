// curt/access_policy.hpp: the public path of curt/execution/access_policy.hpp.
#include <curt/execution/access_policy.hpp>
