// curt/detail/driver.hpp: the public path of curt/driver.hpp.
#include <curt/driver.hpp>
